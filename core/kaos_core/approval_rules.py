"""What makes an approval rule's target valid: the check the Agent CRD's CEL rules make,
shared by the CRD model (``kaos_core.crds.approvals``) and the agent's settings
(``kaos_agent.settings.approvals``). A module of its own: the agent imports no CRD model."""

from __future__ import annotations


def check_rule_target(mcp_server: str | None, peer: str | None, tools: object) -> None:
    """One of mcpServer and peer, and tools only with mcpServer; ``ValueError`` if not."""
    if (mcp_server is None) == (peer is None):
        raise ValueError("an approval rule names exactly one of mcpServer or peer")
    if tools is not None and mcp_server is None:
        raise ValueError("tools narrows an mcpServer rule; a peer rule has none")
