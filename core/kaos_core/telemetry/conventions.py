"""Span and attribute names of the OpenTelemetry GenAI conventions KAOS emits, in one place.

Agent runs, model calls and tool calls come from pydantic-ai's own instrumentation
(``invoke_agent``, ``chat``, ``execute_tool``); the memory operations follow the GenAI
memory conventions (semantic-conventions-genai#140); the ``kaos.*`` names are ours.
"""

from __future__ import annotations

from typing import Final

OPERATION: Final = "gen_ai.operation.name"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"

# Memory operations and attributes.
SEARCH_MEMORY: Final = "search_memory"
UPDATE_MEMORY: Final = "update_memory"
DELETE_MEMORY: Final = "delete_memory"
MEMORY_STORE_ID: Final = "gen_ai.memory.store.id"
MEMORY_QUERY_TEXT: Final = "gen_ai.memory.query.text"  # opt-in (content capture)
MEMORY_RECORDS: Final = "gen_ai.memory.records"  # opt-in (content capture)

# KAOS attributes: the scope level of a memory operation and what it touched.
MEMORY_SCOPE_LEVEL: Final = "kaos.memory.scope.level"
MEMORY_SESSION: Final = "kaos.memory.session"
MEMORY_DEGRADED: Final = "kaos.memory.degraded"
MEMORY_RESULT_COUNT: Final = "kaos.memory.result.count"
MEMORY_TURNS: Final = "kaos.memory.turns"
MEMORY_FOLDS: Final = "kaos.memory.folds"
MEMORY_FOLD_ID: Final = "kaos.memory.fold.id"
MEMORY_REPLICA: Final = "kaos.memory.replica"
MEMORY_DELETED_TURNS: Final = "kaos.memory.deleted.turns"
MEMORY_DELETED_FACTS: Final = "kaos.memory.deleted.facts"

# Delegation between agents (the client span of a call to a peer).
DELEGATION_TRANSPORT: Final = "kaos.delegation.transport"

# Operator reconciles.
RECONCILE_KIND: Final = "kaos.resource.kind"
RECONCILE_NAMESPACE: Final = "k8s.namespace.name"
RECONCILE_NAME: Final = "kaos.resource.name"
RECONCILE_OUTCOME: Final = "kaos.reconcile.outcome"
