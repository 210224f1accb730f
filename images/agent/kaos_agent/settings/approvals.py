"""Approval gates: the tool calls that wait for a human's decision (``kaos_agent.approvals``).

``AGENT_APPROVALS`` is the JSON object the operator renders from ``spec.approvals``:
``{"rules": [...], "timeoutSeconds": ..., "onTimeout": "deny"|"approve"}``, each rule
``{"mcpServer": name, "tools": [...]}`` (``tools`` optional: every tool of the server) or
``{"peer": name}`` (the delegation to that peer). Unset: no call waits.
"""

from __future__ import annotations

import json
from typing import ClassVar, Literal, Self

from kaos_core import agent_env as env
from kaos_core.approval_rules import check_rule_target
from kaos_core.settings import SettingsGroup, setting
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_RULES = 32
# The CRD asks for 60 seconds at least; the runtime takes less (a test's timeout).
MIN_TIMEOUT = 1
MAX_TIMEOUT = 604_800


class ApprovalRule(BaseModel):
    """One gate: an MCP server's tools (all, or those listed), or one peer's delegation."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True)

    mcp_server: str | None = Field(default=None, alias="mcpServer", min_length=1, max_length=63)
    tools: tuple[str, ...] | None = Field(default=None, min_length=1, max_length=64)
    peer: str | None = Field(default=None, min_length=1, max_length=63)

    @model_validator(mode="after")
    def _one_target(self) -> Self:
        check_rule_target(self.mcp_server, self.peer, self.tools)
        return self


class ApprovalPolicy(BaseModel):
    """The gates of one agent and how long a paused run waits."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True)

    rules: tuple[ApprovalRule, ...] = Field(min_length=1, max_length=MAX_RULES)
    timeout_seconds: int = Field(
        default=3600, alias="timeoutSeconds", ge=MIN_TIMEOUT, le=MAX_TIMEOUT
    )
    on_timeout: Literal["deny", "approve"] = Field(default="deny", alias="onTimeout")

    def gates_server(self, server: str, tool: str) -> bool:
        """Whether a call of ``tool`` of MCP server ``server`` waits for approval."""
        return any(
            r.mcp_server == server and (r.tools is None or tool in r.tools) for r in self.rules
        )

    def gates_peer(self, peer: str) -> bool:
        """Whether delegating to the peer Agent ``peer`` waits for approval."""
        return any(r.peer == peer for r in self.rules)


class ApprovalSettings(SettingsGroup):
    """The approval gates of this agent (none: every tool runs when the model calls it)."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Approval gates"

    policy: ApprovalPolicy | None = setting(
        'JSON object `{"rules": [...], "timeoutSeconds", "onTimeout"}`: each rule'
        ' `{"mcpServer": name, "tools": [...]}` (tools optional: all of the server) or'
        ' `{"peer": name}` (delegation to it); 1 to 32 rules; a call a rule matches pauses'
        " its A2A task in input-required until approved or denied; `timeoutSeconds` 1 to"
        " 604800 (default 3600), then `onTimeout` (`deny`, the default, or `approve`)",
        env=env.AGENT_APPROVALS,
        default=None,
        default_doc="none",
    )

    @field_validator("policy", mode="before")
    @classmethod
    def _parse(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        if not value.strip():
            return None
        try:
            parsed = json.loads(value)
        except ValueError:
            raise ValueError("not JSON: a JSON object of approval rules is expected") from None
        if not isinstance(parsed, dict):
            raise ValueError("a JSON object of approval rules is expected")
        return parsed
