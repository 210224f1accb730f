"""What a run may use: its budgets, the MCP servers whose tools it is offered, and the peer
agents it may delegate to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from kaos_core import agent_env as env
from kaos_core.auth import names as auth_names
from kaos_core.endpoints import Endpoint
from kaos_core.settings import SettingsGroup, setting
from pydantic import field_validator

from kaos_agent.settings.base import endpoints


class RunBudget(SettingsGroup):
    """What one run may spend beyond its model requests (``None``: no limit)."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Run budgets"

    max_tool_calls: int | None = setting(
        "tool calls one run may make, 0 to 1000 (MCP, delegation and memory tools alike); the"
        " run that would exceed it stops with a final answer saying so and finish reason"
        " `length`",
        env=env.TASK_MAX_TOOL_CALLS,
        default=None,
        default_doc="no limit",
        ge=0,
        le=1000,
    )
    max_wall_seconds: float | None = setting(
        "wall time one run may take, in seconds; a run past it stops the same way (an"
        " autonomous iteration keeps the shorter of this and `AUTONOMOUS_TIMEOUT_SECONDS`)",
        env=env.TASK_MAX_WALL_SECONDS,
        default=None,
        default_doc="no limit",
        gt=0,
        le=86400,
    )


class McpServers(SettingsGroup):
    """The MCP servers whose tools the loop offers."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "MCP tools"

    servers: tuple[Endpoint, ...] = setting(
        "comma list of `name:url` or bare `url`; a URL without a path gets `/mcp`",
        env=env.MCP_SERVERS,
        default=(),
    )
    token_file: Path | None = setting(
        "the pod's projected service-account token for MCP servers (audience"
        " `kaos.dev/mcp`), sent as `X-Agent-Token` on every MCP request and re-read when"
        " kubelet rotates it; needed when the MCP servers verify their callers",
        env=auth_names.AGENT_MCP_TOKEN_FILE,
        default=None,
    )

    @field_validator("servers", mode="before")
    @classmethod
    def _parse(cls, value: object) -> object:
        return endpoints(value, variable=env.MCP_SERVERS, require_name=False)


@dataclass(frozen=True)
class ToolSettings:
    """What the MCP toolsets are built from: the servers, and the model's timeout."""

    servers: tuple[Endpoint, ...]
    timeout_seconds: float
    # The token presented to the MCP servers (``AGENT_MCP_TOKEN_FILE``); None: none.
    token_file: Path | None = None


class DelegationSettings(SettingsGroup):
    """Peer agents reachable through ``delegate_to_<name>`` tools."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Delegation to peer agents"

    peers: tuple[Endpoint, ...] = setting(
        "comma list of `name:url` (peer base URLs), one `delegate_to_<name>` tool each",
        env=env.AGENT_SUB_AGENTS,
        default=(),
    )
    max_depth: int = setting(
        "delegations deeper than this (0 to 20) are refused (the depth travels in "
        "`X-KAOS-Delegation-Depth` and A2A metadata `kaos.delegationDepth`)",
        env=env.MAX_DELEGATION_DEPTH,
        default=3,
        ge=0,
        le=20,
    )
    timeout_seconds: float = setting(
        "per delegated call", env=env.DELEGATION_TIMEOUT_SECONDS, default=120.0, gt=0
    )
    token_file: Path | None = setting(
        "the pod's projected service-account token for peers (audience `kaos.dev/agent`),"
        " sent as `X-Agent-Token` on every delegation (A2A and chat) and re-read when"
        " kubelet rotates it; needed when peers verify agent identity",
        env=auth_names.AGENT_PEER_TOKEN_FILE,
        default=None,
    )

    @field_validator("peers", mode="before")
    @classmethod
    def _parse(cls, value: object) -> object:
        return endpoints(value, variable=env.AGENT_SUB_AGENTS, require_name=True)
