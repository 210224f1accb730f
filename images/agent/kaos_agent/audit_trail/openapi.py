"""``GET /v1/audit`` in the agent's OpenAPI document (``kaos_agent.openapi``)."""

from __future__ import annotations

from kaos_core.openapi import Operation, Query

from kaos_agent.audit.log import DEFAULT_LIMIT, MAX_QUERY_LIMIT
from kaos_agent.audit_trail.http import ROUTE
from kaos_agent.audit_trail.query import MAX_TASK_CHARS
from kaos_agent.audit_trail.wire import AuditList
from kaos_agent.records.openapi import TIME, UNAUTHORIZED, read_operation


def audit_operation() -> Operation:
    return read_operation(
        ROUTE,
        "agentAudit",
        "The agent's audit trail: its tool calls, delegations and approval decisions",
        "The latest `limit` entries matching the query, oldest first (in the order the"
        " calls started), from the trail beside the task store (shared by the replicas that"
        " share it). Each has a digest of the call's arguments, the arguments themselves"
        " only when the Agent records them (`spec.audit.recordArguments`). Under verified"
        " user identity the caller's token is needed and a user reads only their own"
        " entries; with `AGENT_RBAC` RBAC must allow `get` on `agents/audit` of this Agent,"
        " and then every entry is read.",
        ("The entries.", AuditList),
        invalid="`invalid_query`: an unknown or repeated parameter, a malformed time or"
        " limit, `until` not after `since`; `principal_header_refused` under"
        " verified user identity.",
        unauthorized=UNAUTHORIZED + "; a delegation without a valid agent token.",
        forbidden="`agent_not_granted`: RBAC does not allow `get agents/audit`.",
        query=[
            Query(
                "task",
                "Only this A2A task's entries.",
                {"type": "string", "minLength": 1, "maxLength": MAX_TASK_CHARS},
            ),
            Query(
                "since",
                "Entries started at or after: epoch seconds, a UTC date (YYYY-MM-DD) or an"
                " RFC 3339 time with its offset.",
                TIME,
            ),
            Query("until", "Entries started before (the same forms), after `since`.", TIME),
            Query(
                "limit",
                "At most this many entries, the latest.",
                {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_QUERY_LIMIT,
                    "default": DEFAULT_LIMIT,
                },
            ),
        ],
    )
