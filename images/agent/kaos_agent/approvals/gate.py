"""Which toolsets wait for approval: the MCP servers and peers the Agent's rules name.

A gate wraps the guarded toolset (``kaos_agent.toolsets.GuardedToolset``) from outside, so
a call that needs approval is stopped before the guard, the tool server or the peer sees
it: nothing runs, nothing is counted as a call, until a decision approves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kaos_core.endpoints import Endpoint
from pydantic_ai import RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.approval_required import ApprovalRequiredToolset

from kaos_agent.context import RunDeps
from kaos_agent.settings import ApprovalPolicy

MCP_LABEL = "mcp:"
DELEGATION_LABEL = "delegation"


def _server_gate(policy: ApprovalPolicy, server: str) -> Any:
    def needs(ctx: RunContext[RunDeps], tool: ToolDefinition, args: dict[str, Any]) -> bool:
        return policy.gates_server(server, tool.name)

    return needs


def _peer_gate(names: frozenset[str]) -> Any:
    def needs(ctx: RunContext[RunDeps], tool: ToolDefinition, args: dict[str, Any]) -> bool:
        return tool.name in names

    return needs


def gate_toolsets(
    toolsets: Sequence[AbstractToolset[RunDeps]],
    policy: ApprovalPolicy | None,
    peers: Sequence[Endpoint] = (),
) -> list[AbstractToolset[RunDeps]]:
    """``toolsets`` with the gated ones wrapped (unchanged without a policy)."""
    if policy is None:
        return list(toolsets)
    peer_tools = frozenset(f"delegate_to_{p.tool_name}" for p in peers if policy.gates_peer(p.name))
    servers = {r.mcp_server for r in policy.rules if r.mcp_server is not None}
    out: list[AbstractToolset[RunDeps]] = []
    for toolset in toolsets:
        label = str(getattr(toolset, "label_text", ""))
        server = label.removeprefix(MCP_LABEL) if label.startswith(MCP_LABEL) else None
        if server is not None and server in servers:
            toolset = ApprovalRequiredToolset(toolset, _server_gate(policy, server))
        elif label == DELEGATION_LABEL and peer_tools:
            toolset = ApprovalRequiredToolset(toolset, _peer_gate(peer_tools))
        out.append(toolset)
    return out
