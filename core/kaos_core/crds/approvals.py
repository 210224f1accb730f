"""An Agent's approval gates: tool calls that wait for a human's decision before they run.

A rule names an MCPServer (all its tools, or only those listed) or a peer Agent (the
delegation to it). When the model calls a gated tool, the run pauses: its A2A task waits
in ``input-required`` with the pending call until the run's own user, or anyone RBAC lets
``create`` ``agents/approve`` on the Agent, approves or denies it, or until the timeout
decides it (``onTimeout``). The agent runtime's side is ``kaos_agent.approvals``.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import ConfigDict, Field, model_validator

from kaos_core.approval_rules import check_rule_target
from kaos_core.crds.common import DNS_LABEL, NAME_MAX, CRDModel, cel

RULES_MAX = 32
TOOLS_MAX = 64
TOOL_NAME_MAX = 128
TIMEOUT_MIN = 60
TIMEOUT_MAX = 604_800
TIMEOUT_DEFAULT = 3600


class ApprovalRule(CRDModel):
    """Calls that need approval: an MCPServer's tools (all or some), or a peer's delegation."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "has(self.mcpServer) != has(self.peer)",
                "an approval rule names exactly one of mcpServer or peer",
            ),
            (
                "!has(self.tools) || has(self.mcpServer)",
                "tools narrows an mcpServer rule; a peer rule has none",
            ),
        )
    )

    mcp_server: str | None = Field(
        default=None,
        min_length=1,
        max_length=NAME_MAX,
        pattern=DNS_LABEL,
        alias="mcpServer",
        description="An MCPServer of spec.mcpServers: calls to its tools need approval.",
    )
    tools: list[str] | None = Field(
        default=None,
        min_length=1,
        max_length=TOOLS_MAX,
        json_schema_extra={
            "x-kubernetes-list-type": "set",
            "items": {"type": "string", "minLength": 1, "maxLength": TOOL_NAME_MAX},
        },
        description="Only these tools of the MCPServer (default: every tool of it).",
    )
    peer: str | None = Field(
        default=None,
        min_length=1,
        max_length=NAME_MAX,
        pattern=DNS_LABEL,
        description="A peer Agent of agentNetwork.access: delegating to it needs approval.",
    )

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        # The CEL rules' check, for objects this model reads without the API server.
        check_rule_target(self.mcp_server, self.peer, self.tools)
        return self


class AgentApprovals(CRDModel):
    """Tool calls that wait for a human's approval, and how long they wait."""

    rules: list[ApprovalRule] = Field(
        min_length=1,
        max_length=RULES_MAX,
        description="The gated calls (1 to 32 rules); a call any rule matches needs approval.",
    )
    timeout_seconds: int = Field(
        default=TIMEOUT_DEFAULT,
        ge=TIMEOUT_MIN,
        le=TIMEOUT_MAX,
        description="How long a paused run waits for a decision (60 to 604800 seconds,"
        " default 3600); then onTimeout decides.",
    )
    on_timeout: Literal["deny", "approve"] = Field(
        default="deny",
        description="The decision when nobody decided in time: deny (the default) or approve.",
    )


def approvals_field() -> Any:
    """``spec.approvals``: optional; without it no call waits."""
    return Field(
        default=None,
        description="Tool calls that wait for a human's approval (per MCPServer, per tool,"
        " or delegation to a peer); see the Approvals page of the documentation.",
    )
