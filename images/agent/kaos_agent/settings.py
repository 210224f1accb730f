"""The agent runtime's settings: one environment-backed object, validated before start.

Variable names come from ``kaos_core.agent_env`` (the operator writes the same names).
Lists arrive as comma-separated ``name:url`` entries; they are parsed here into typed
peers and tool servers so the rest of the runtime never sees raw strings. Invariants
between settings (remote memory needs an endpoint, memory tools need remote memory, …)
are checked at load, so a contradictory pod fails at start with one readable line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from kaos_core import agent_env as env
from kaos_core.memory.contract import FailureMode, Level, levels_up_to
from kaos_core.memory.identity import AGENT_IDENTITY_RE
from kaos_core.settings import EnvSettings
from pydantic import Field, field_validator, model_validator

MemoryType = Literal["none", "local", "remote"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,62}$")


def _env(name: str) -> Any:
    return {"env": name}


@dataclass(frozen=True)
class Endpoint:
    """A named peer agent or MCP server."""

    name: str
    url: str

    @property
    def tool_name(self) -> str:
        """The name as a tool identifier (letters, digits, underscores)."""
        return re.sub(r"[^A-Za-z0-9_]", "_", self.name)


def parse_endpoints(raw: str, *, variable: str, require_name: bool) -> tuple[Endpoint, ...]:
    """Parse ``name:url,name:url`` (or bare ``url`` entries when names are optional).

    A bare URL takes its host name as its name. Names must be unique: two peers with one
    name would become one tool.
    """
    out: list[Endpoint] = []
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        if item.startswith(("http://", "https://")):
            if require_name:
                raise ValueError(f"{variable}: entry {item!r} must be name:url")
            name, url = urlsplit(item).hostname or "server", item
        else:
            name, sep, url = item.partition(":")
            name = name.strip()
            url = url.strip()
            if not sep or not _NAME_RE.match(name):
                raise ValueError(f"{variable}: entry {item!r} must be name:url")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{variable}: {url!r} is not an http(s) URL")
        out.append(Endpoint(name=name, url=url.rstrip("/")))
    names = [e.tool_name for e in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{variable}: duplicate names {', '.join(dupes)}")
    return tuple(out)


class AgentSettings(EnvSettings):
    """Every setting of one agent pod; see ``kaos_core.agent_env`` for the names."""

    name: str = Field(default="agent", json_schema_extra=_env(env.AGENT_NAME))
    description: str = Field(default="", json_schema_extra=_env(env.AGENT_DESCRIPTION))
    identity: str | None = Field(default=None, json_schema_extra=_env(env.AGENT_IDENTITY))
    host: str = Field(default="0.0.0.0", json_schema_extra=_env(env.AGENT_HOST))
    port: int = Field(default=8000, ge=1, le=65535, json_schema_extra=_env(env.AGENT_PORT))
    public_url: str | None = Field(default=None, json_schema_extra=_env(env.AGENT_PUBLIC_URL))
    instructions: str = Field(
        default="You are a helpful assistant.", json_schema_extra=_env(env.AGENT_INSTRUCTIONS)
    )
    a2a_enabled: bool = Field(default=True, json_schema_extra=_env(env.AGENT_A2A_ENABLED))

    model_api_url: str = Field(json_schema_extra=_env(env.MODEL_API_URL))
    model_name: str = Field(min_length=1, json_schema_extra=_env(env.MODEL_NAME))
    model_api_key: str = Field(default="not-needed", json_schema_extra=_env(env.MODEL_API_KEY))
    model_timeout_seconds: float = Field(
        default=120.0, gt=0, json_schema_extra=_env(env.MODEL_TIMEOUT_SECONDS)
    )
    max_steps: int = Field(
        default=5, ge=1, le=100, json_schema_extra=_env(env.REASONING_LOOP_MAX_STEPS)
    )

    mcp_servers_raw: str = Field(default="", json_schema_extra=_env(env.MCP_SERVERS))
    sub_agents_raw: str = Field(default="", json_schema_extra=_env(env.AGENT_SUB_AGENTS))
    max_delegation_depth: int = Field(
        default=3, ge=0, le=20, json_schema_extra=_env(env.MAX_DELEGATION_DEPTH)
    )
    delegation_timeout_seconds: float = Field(
        default=120.0, gt=0, json_schema_extra=_env(env.DELEGATION_TIMEOUT_SECONDS)
    )

    memory_type: MemoryType = Field(default="local", json_schema_extra=_env(env.MEMORY_TYPE))
    memory_endpoint: str | None = Field(default=None, json_schema_extra=_env(env.MEMORY_ENDPOINT))
    memory_max_read_scope: Level = Field(
        default="session", json_schema_extra=_env(env.MEMORY_MAX_READ_SCOPE)
    )
    memory_tools: bool = Field(default=False, json_schema_extra=_env(env.MEMORY_TOOLS))
    memory_failure_mode: FailureMode = Field(
        default="soft", json_schema_extra=_env(env.MEMORY_FAILURE_MODE)
    )
    memory_token_budget: int = Field(
        default=4096, ge=64, json_schema_extra=_env(env.MEMORY_TOKEN_BUDGET)
    )
    memory_top_k: int = Field(default=5, ge=1, le=100, json_schema_extra=_env(env.MEMORY_TOP_K))
    memory_timeout_seconds: float = Field(
        default=10.0, gt=0, json_schema_extra=_env(env.MEMORY_TIMEOUT_SECONDS)
    )
    memory_require_principal: bool = Field(
        default=False, json_schema_extra=_env(env.MEMORY_REQUIRE_PRINCIPAL)
    )
    memory_require_agent_identity: bool = Field(
        default=False, json_schema_extra=_env(env.MEMORY_REQUIRE_AGENT_IDENTITY)
    )

    autonomous_goal: str | None = Field(default=None, json_schema_extra=_env(env.AUTONOMOUS_GOAL))
    autonomous_interval_seconds: float = Field(
        default=60.0, gt=0, json_schema_extra=_env(env.AUTONOMOUS_INTERVAL_SECONDS)
    )
    autonomous_max_steps: int | None = Field(
        default=None, ge=1, le=100, json_schema_extra=_env(env.AUTONOMOUS_MAX_STEPS)
    )
    autonomous_timeout_seconds: float = Field(
        default=300.0, gt=0, json_schema_extra=_env(env.AUTONOMOUS_TIMEOUT_SECONDS)
    )

    @field_validator("model_api_url", "memory_endpoint", "public_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL")
        return value.rstrip("/")

    @field_validator("identity")
    @classmethod
    def _agent_identity(cls, value: str | None) -> str | None:
        if value is not None and not AGENT_IDENTITY_RE.match(value):
            raise ValueError("must be kaos://agent/<namespace>/<name>")
        return value

    @model_validator(mode="after")
    def _invariants(self) -> AgentSettings:
        # Parsing here reports malformed lists at load, naming the variable.
        parse_endpoints(self.mcp_servers_raw, variable=env.MCP_SERVERS, require_name=False)
        parse_endpoints(self.sub_agents_raw, variable=env.AGENT_SUB_AGENTS, require_name=True)
        if self.memory_max_read_scope == "store":
            raise ValueError(
                f"{env.MEMORY_MAX_READ_SCOPE}=store: the store scope is administrative, "
                "never granted to an agent"
            )
        if self.memory_type == "remote":
            if self.memory_endpoint is None:
                raise ValueError(f"{env.MEMORY_TYPE}=remote needs {env.MEMORY_ENDPOINT}")
            if self.memory_require_agent_identity and self.identity is None:
                raise ValueError(
                    f"{env.MEMORY_REQUIRE_AGENT_IDENTITY}=true needs {env.AGENT_IDENTITY}"
                )
            if self.memory_max_read_scope == "agent" and self.identity is None:
                raise ValueError(f"{env.MEMORY_MAX_READ_SCOPE}=agent needs {env.AGENT_IDENTITY}")
        else:
            if self.memory_endpoint is not None:
                raise ValueError(
                    f"{env.MEMORY_ENDPOINT} is set but {env.MEMORY_TYPE}={self.memory_type}"
                )
            if self.memory_tools:
                raise ValueError(f"{env.MEMORY_TOOLS}=true needs {env.MEMORY_TYPE}=remote")
            if self.memory_max_read_scope != "session":
                raise ValueError(
                    f"{env.MEMORY_MAX_READ_SCOPE}={self.memory_max_read_scope} needs "
                    f"{env.MEMORY_TYPE}=remote"
                )
        return self

    @property
    def mcp_servers(self) -> tuple[Endpoint, ...]:
        return parse_endpoints(self.mcp_servers_raw, variable=env.MCP_SERVERS, require_name=False)

    @property
    def sub_agents(self) -> tuple[Endpoint, ...]:
        return parse_endpoints(
            self.sub_agents_raw, variable=env.AGENT_SUB_AGENTS, require_name=True
        )

    @property
    def model_base_url(self) -> str:
        """The OpenAI-compatible base URL: the ModelAPI endpoint plus ``/v1``."""
        url = self.model_api_url
        return url if url.endswith("/v1") else url + "/v1"

    @property
    def entitled_levels(self) -> tuple[Level, ...]:
        """Read scopes this agent may use, narrowest first, up to its maximum."""
        return levels_up_to(self.memory_max_read_scope)

    @property
    def autonomous(self) -> bool:
        return bool(self.autonomous_goal)

    def card_url(self) -> str:
        return self.public_url or f"http://{self._card_host()}:{self.port}"

    def _card_host(self) -> str:
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
