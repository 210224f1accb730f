"""The agent's memory: which backend, how far it may read, what it does on failure."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from kaos_core import agent_env as env
from kaos_core.auth import names as auth_names
from kaos_core.memory.contract import FailureMode, Level, levels_up_to
from kaos_core.settings import SettingsGroup, setting
from pydantic import field_validator

from kaos_agent.settings.base import http_url

MemoryType = Literal["none", "local", "remote"]
# The memory tools offered to the model: both, search_memory only, save_memory only, none.
MemoryTools = Literal["all", "read", "write", "none"]


class AgentMemorySettings(SettingsGroup):
    """The memory backend, its read ceiling and failure mode."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Memory"

    type: MemoryType = setting(
        "`none`, `local` (pod window) or `remote` (memory service)",
        env=env.MEMORY_TYPE,
        default="local",
    )
    endpoint: str | None = setting(
        "memory service URL; required by `remote`, refused otherwise",
        env=env.MEMORY_ENDPOINT,
        default=None,
    )
    max_read_scope: Level = setting(
        "`session`, `agent` or `user`; wider than `session` needs `remote`; `store` refused",
        env=env.MEMORY_MAX_READ_SCOPE,
        default="session",
    )
    tools: MemoryTools = setting(
        "memory tools offered to the model: `all` (`search_memory` and `save_memory`), `read`"
        " (`search_memory`), `write` (`save_memory`) or `none`; anything but `none` needs"
        " `remote`. The booleans of earlier versions are read as `all` (`true`) and `none`"
        " (`false`)",
        env=env.MEMORY_TOOLS,
        default="none",
    )
    failure_mode: FailureMode = setting(
        "`soft`, or `strict`: a failed write answers 500 `memory_write_failed`",
        env=env.MEMORY_FAILURE_MODE,
        default="soft",
    )
    write_after_answer: bool = setting(
        "remote, `soft`: send a turn's write after the answer instead of before it (the"
        " session's next turn on this pod waits for it; a forget after the answer still"
        " wins). Saves the write's round trip where the memory service has cores of its"
        " own; a client that reads the store right after an answer may not see the turn yet",
        env=env.MEMORY_WRITE_AFTER_ANSWER,
        default=False,
    )
    token_budget: int = setting(
        "local window budget in tokens (`ceil(chars/4) + 4` per turn, as the memory service)",
        env=env.MEMORY_TOKEN_BUDGET,
        default=4096,
        ge=64,
    )
    top_k: int = setting(
        "long-term facts recalled per run, 1 to 100",
        env=env.MEMORY_TOP_K,
        default=5,
        ge=1,
        le=100,
    )
    timeout_seconds: float = setting(
        "per memory request", env=env.MEMORY_TIMEOUT_SECONDS, default=10.0, gt=0
    )
    require_principal: bool = setting(
        "posture: refuse memory writes without `X-Principal` (the service refuses them too)",
        env=env.MEMORY_REQUIRE_PRINCIPAL,
        default=False,
    )
    require_agent_identity: bool = setting(
        "posture: remote memory needs `AGENT_IDENTITY` (checked at start)",
        env=env.MEMORY_REQUIRE_AGENT_IDENTITY,
        default=False,
    )
    token_file: Path | None = setting(
        "the pod's projected service-account token for memory (audience `kaos.dev/memory`),"
        " sent as `X-Agent-Token` on every memory call and re-read when kubelet rotates it;"
        " needed when the memory service verifies agent identity",
        env=auth_names.AGENT_MEMORY_TOKEN_FILE,
        default=None,
    )

    @field_validator("tools", mode="before")
    @classmethod
    def _earlier_booleans(cls, value: object) -> object:
        # Pods configured before the tools became a mode carry a boolean.
        if isinstance(value, bool):
            return "all" if value else "none"
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return "all" if value.strip().lower() == "true" else "none"
        return value

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return http_url(value)

    def problems(self, prefix: str) -> list[str]:
        kind, scope = self.env_name("type", prefix), self.env_name("max_read_scope", prefix)
        endpoint, tools = self.env_name("endpoint", prefix), self.env_name("tools", prefix)
        if self.max_read_scope == "store":
            return [f"{scope}=store: the store scope is administrative, never granted to an agent"]
        if self.type == "remote":
            return [] if self.endpoint is not None else [f"{kind}=remote needs {endpoint}"]
        if self.endpoint is not None:
            return [f"{endpoint} is set but {kind}={self.type}"]
        if self.tools != "none":
            return [f"{tools}={self.tools} needs {kind}=remote"]
        if self.max_read_scope != "session":
            return [f"{scope}={self.max_read_scope} needs {kind}=remote"]
        return []

    @property
    def entitled_levels(self) -> tuple[Level, ...]:
        """Read scopes this agent may use, narrowest first, up to its maximum."""
        return levels_up_to(self.max_read_scope)
