"""Desired state as pure functions: a resource plus its resolved context in, objects out.

Nothing here talks to the API server. The reconcilers resolve the context (endpoints,
readiness, posture, images) and apply what these functions return; the local stack
starts processes with exactly the environment ``agent_env``, ``memory_store_env`` and
``mcp_env`` produce, so a pod and a local process of one resource see the same settings.
"""

from kaos_operator.desired.agent import AgentContext, agent_env, desired_agent_objects
from kaos_operator.desired.common import FIELD_MANAGER, Endpoint
from kaos_operator.desired.mcpserver import McpContext, desired_mcpserver_objects, mcp_env
from kaos_operator.desired.memorystore import (
    MemoryStoreContext,
    desired_memorystore_objects,
    memory_store_env,
)
from kaos_operator.desired.modelapi import ModelAPIContext, desired_modelapi_objects

__all__ = [
    "FIELD_MANAGER",
    "AgentContext",
    "Endpoint",
    "McpContext",
    "MemoryStoreContext",
    "ModelAPIContext",
    "agent_env",
    "desired_agent_objects",
    "desired_mcpserver_objects",
    "desired_memorystore_objects",
    "desired_modelapi_objects",
    "mcp_env",
    "memory_store_env",
]
