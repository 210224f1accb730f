"""The agent runtime's settings: one environment-backed object, validated before start.

Variable names come from ``kaos_core.agent_env`` (the operator writes the same names).
Every field belongs to one concern (its ``group``) and carries a description; the
README's tables are generated from them. Each concern has a typed view (``.model``,
``.memory``, ``.delegation``, ``.tools``, ``.autonomous``, ``.auth``) and each component
is handed only its own. Lists arrive as comma-separated ``name:url`` entries
(``kaos_core.endpoints``) and are parsed into typed endpoints, so the rest of the runtime
never sees raw strings. Invariants between settings (remote memory needs an endpoint,
memory tools need remote memory, …) are checked at load, so a contradictory pod fails at
start with one readable line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kaos_core import agent_env as env
from kaos_core.auth import names as auth_names
from kaos_core.auth.config import (
    DEFAULT_LEEWAY,
    REVIEW_CACHE_SECONDS,
    AuthMode,
    CallerAuthSettings,
    UserAuthSettings,
)
from kaos_core.endpoints import Endpoint, parse_endpoints
from kaos_core.errors import KaosError
from kaos_core.memory.contract import FailureMode, Level, levels_up_to
from kaos_core.memory.identity import validate_agent_identity
from pydantic import field_validator, model_validator

# GROUPS, ModelSettings and Sampling are re-exported: the settings' public names.
from kaos_agent.settings_base import GROUPS as GROUPS
from kaos_agent.settings_base import http_url, setting
from kaos_agent.settings_model import ModelFields
from kaos_agent.settings_model import ModelSettings as ModelSettings
from kaos_agent.settings_model import Sampling as Sampling

MemoryType = Literal["none", "local", "remote"]
# The memory tools offered to the model: both, search_memory only, save_memory only, none.
MemoryTools = Literal["all", "read", "write", "none"]


@dataclass(frozen=True)
class RunBudget:
    """What one run may spend beyond its model requests (``None``: no limit)."""

    max_tool_calls: int | None = None
    max_wall_seconds: float | None = None


@dataclass(frozen=True)
class ToolSettings:
    """The MCP servers whose tools the loop offers."""

    servers: tuple[Endpoint, ...]
    timeout_seconds: float


@dataclass(frozen=True)
class DelegationSettings:
    """Peer agents reachable through ``delegate_to_<name>`` tools."""

    peers: tuple[Endpoint, ...]
    max_depth: int
    timeout_seconds: float
    # This agent's projected token for peers (audience ``kaos.dev/agent``), sent as
    # ``X-Agent-Token`` on every delegation; ``None`` sends none.
    token_file: Path | None = None


@dataclass(frozen=True)
class AgentMemorySettings:
    """The memory backend, its read ceiling and failure mode."""

    type: MemoryType
    endpoint: str | None
    agent_identity: str | None
    max_read_scope: Level
    tools: MemoryTools
    failure_mode: FailureMode
    token_budget: int
    top_k: int
    timeout_seconds: float
    require_principal: bool
    token_file: Path | None = None

    @property
    def entitled_levels(self) -> tuple[Level, ...]:
        """Read scopes this agent may use, narrowest first, up to its maximum."""
        return levels_up_to(self.max_read_scope)


@dataclass(frozen=True)
class AutonomousSettings:
    """The goal the agent pursues on its own schedule, and its owner."""

    goal: str
    interval_seconds: float
    max_steps: int
    timeout_seconds: float
    # The run's principal and session: the agent itself, one stable session per agent.
    owner: str
    session_id: str


class AgentSettings(ModelFields):
    """Every setting of one agent pod; see ``kaos_core.agent_env`` for the names."""

    name: str = setting(
        env.AGENT_NAME, "agent", "name on the agent card and in `/v1/models`", default="agent"
    )
    description: str = setting(env.AGENT_DESCRIPTION, "agent", "agent card description", default="")
    identity: str | None = setting(
        env.AGENT_IDENTITY,
        "agent",
        "`kaos://agent/<ns>/<name>`; sent as `X-Agent-Identity` to memory; required for "
        "remote memory at `agent` scope or under `MEMORY_REQUIRE_AGENT_IDENTITY`",
        default=None,
    )
    instructions: str = setting(
        env.AGENT_INSTRUCTIONS,
        "agent",
        "system instructions of the reasoning loop",
        default="You are a helpful assistant.",
    )

    host: str = setting(env.AGENT_HOST, "server", "listen address", default="0.0.0.0")
    port: int = setting(env.AGENT_PORT, "server", "listen port", default=8000, ge=1, le=65535)
    public_url: str | None = setting(
        env.AGENT_PUBLIC_URL,
        "server",
        "URL put on the agent card",
        default=None,
        default_doc="`http://<host>:<port>`",
    )
    a2a_enabled: bool = setting(
        env.AGENT_A2A_ENABLED,
        "server",
        "serve the agent card and A2A JSON-RPC at `/`",
        default=True,
    )

    task_max_tool_calls: int | None = setting(
        env.TASK_MAX_TOOL_CALLS,
        "budget",
        "tool calls one run may make, 0 to 1000 (MCP, delegation and memory tools alike); the"
        " run that would exceed it stops with a final answer saying so and finish reason"
        " `length`",
        default=None,
        default_doc="no limit",
        ge=0,
        le=1000,
    )
    task_max_wall_seconds: float | None = setting(
        env.TASK_MAX_WALL_SECONDS,
        "budget",
        "wall time one run may take, in seconds; a run past it stops the same way (an"
        " autonomous iteration keeps the shorter of this and `AUTONOMOUS_TIMEOUT_SECONDS`)",
        default=None,
        default_doc="no limit",
        gt=0,
        le=86400,
    )

    mcp_servers_raw: str = setting(
        env.MCP_SERVERS,
        "tools",
        "comma list of `name:url` or bare `url`; a URL without a path gets `/mcp`",
        default="",
    )

    sub_agents_raw: str = setting(
        env.AGENT_SUB_AGENTS,
        "delegation",
        "comma list of `name:url` (peer base URLs), one `delegate_to_<name>` tool each",
        default="",
    )
    max_delegation_depth: int = setting(
        env.MAX_DELEGATION_DEPTH,
        "delegation",
        "delegations deeper than this (0 to 20) are refused (the depth travels in "
        "`X-KAOS-Delegation-Depth` and A2A metadata `kaos.delegationDepth`)",
        default=3,
        ge=0,
        le=20,
    )
    delegation_timeout_seconds: float = setting(
        env.DELEGATION_TIMEOUT_SECONDS, "delegation", "per delegated call", default=120.0, gt=0
    )

    memory_type: MemoryType = setting(
        env.MEMORY_TYPE,
        "memory",
        "`none`, `local` (pod window) or `remote` (memory service)",
        default="local",
    )
    memory_endpoint: str | None = setting(
        env.MEMORY_ENDPOINT,
        "memory",
        "memory service URL; required by `remote`, refused otherwise",
        default=None,
    )
    memory_max_read_scope: Level = setting(
        env.MEMORY_MAX_READ_SCOPE,
        "memory",
        "`session`, `agent` or `user`; wider than `session` needs `remote`; `store` refused",
        default="session",
    )
    memory_tools: MemoryTools = setting(
        env.MEMORY_TOOLS,
        "memory",
        "memory tools offered to the model: `all` (`search_memory` and `save_memory`), `read`"
        " (`search_memory`), `write` (`save_memory`) or `none`; anything but `none` needs"
        " `remote`. The booleans of earlier versions are read as `all` (`true`) and `none`"
        " (`false`)",
        default="none",
    )
    memory_failure_mode: FailureMode = setting(
        env.MEMORY_FAILURE_MODE,
        "memory",
        "`soft`, or `strict`: a failed write answers 500 `memory_write_failed`",
        default="soft",
    )
    memory_token_budget: int = setting(
        env.MEMORY_TOKEN_BUDGET,
        "memory",
        "local window budget in tokens (`ceil(chars/4) + 4` per turn, as the memory service)",
        default=4096,
        ge=64,
    )
    memory_top_k: int = setting(
        env.MEMORY_TOP_K,
        "memory",
        "long-term facts recalled per run, 1 to 100",
        default=5,
        ge=1,
        le=100,
    )
    memory_timeout_seconds: float = setting(
        env.MEMORY_TIMEOUT_SECONDS, "memory", "per memory request", default=10.0, gt=0
    )
    memory_require_principal: bool = setting(
        env.MEMORY_REQUIRE_PRINCIPAL,
        "memory",
        "posture: refuse memory writes without `X-Principal` (the service refuses them too)",
        default=False,
    )
    memory_require_agent_identity: bool = setting(
        env.MEMORY_REQUIRE_AGENT_IDENTITY,
        "memory",
        "posture: remote memory needs `AGENT_IDENTITY` (checked at start)",
        default=False,
    )
    memory_token_file: Path | None = setting(
        auth_names.AGENT_MEMORY_TOKEN_FILE,
        "memory",
        "the pod's projected service-account token for memory (audience `kaos.dev/memory`),"
        " sent as `X-Agent-Token` on every memory call and re-read when kubelet rotates it;"
        " needed when the memory service verifies agent identity",
        default=None,
    )

    autonomous_goal: str | None = setting(
        env.AUTONOMOUS_GOAL, "autonomous", "enables autonomous mode: the goal", default=None
    )
    autonomous_interval_seconds: float = setting(
        env.AUTONOMOUS_INTERVAL_SECONDS,
        "autonomous",
        "pause between iterations",
        default=60.0,
        gt=0,
    )
    autonomous_max_steps: int | None = setting(
        env.AUTONOMOUS_MAX_STEPS,
        "autonomous",
        "model requests per iteration, 1 to 100",
        default=None,
        default_doc="`REASONING_LOOP_MAX_STEPS`",
        ge=1,
        le=100,
    )
    autonomous_timeout_seconds: float = setting(
        env.AUTONOMOUS_TIMEOUT_SECONDS, "autonomous", "wall time per iteration", default=300.0, gt=0
    )

    auth_mode: AuthMode = setting(
        auth_names.AGENT_AUTH_MODE,
        "auth",
        "`off`: delegations are not verified; `jwks`: a request carrying `X-Agent-Token` (the"
        " calling agent's projected service-account token, audience `kaos.dev/agent`) is"
        " verified offline against the service-account issuer's keys, and a request that"
        " claims to be a delegation (`X-Agent-Identity`, or a delegation depth above 0)"
        " without one is 401; `tokenreview`: the same, verified by the API server. A request"
        " with neither is an end user's and proceeds unverified",
        default="off",
    )
    auth_issuer: str | None = setting(
        auth_names.AGENT_AUTH_ISSUER,
        "auth",
        "`jwks` (required there): the cluster's service-account issuer (`iss` of its tokens)."
        " Its keys come from `AGENT_AUTH_JWKS_URL`, else `<API server>/openid/v1/jwks` when"
        " `AGENT_AUTH_API_SERVER` is set, else `<issuer>/.well-known/openid-configuration`",
        default=None,
    )
    auth_jwks_url: str | None = setting(
        auth_names.AGENT_AUTH_JWKS_URL,
        "auth",
        "`jwks`: where to fetch the issuer's keys instead of discovery",
        default=None,
    )
    auth_api_server: str | None = setting(
        auth_names.AGENT_AUTH_API_SERVER,
        "auth",
        "the API server URL (e.g. `https://kubernetes.default.svc`). `tokenreview` (required"
        " there) posts TokenReviews to it (the agent's ServiceAccount needs `create` on"
        " tokenreviews: the chart's `<release>-tokenreview` binding); `jwks` fetches the"
        " issuer's keys from it",
        default=None,
    )
    auth_ca_file: Path | None = setting(
        auth_names.AGENT_AUTH_CA_FILE,
        "auth",
        "CA bundle for the issuer, the JWKS URL and the API server",
        default=None,
        default_doc="system CAs",
    )
    auth_token_file: Path | None = setting(
        auth_names.AGENT_AUTH_TOKEN_FILE,
        "auth",
        "the agent's own API-server token, sent as bearer to the issuer and the API server"
        " (re-read when it changes)",
        default=None,
    )
    auth_leeway: float = setting(
        auth_names.AGENT_AUTH_LEEWAY,
        "auth",
        "seconds of clock skew tolerated on a token's `exp`, `nbf` and `iat` (`jwks`)",
        default=DEFAULT_LEEWAY,
        ge=0,
        le=300,
    )
    auth_review_cache_seconds: float = setting(
        auth_names.AGENT_AUTH_REVIEW_CACHE_SECONDS,
        "auth",
        "`tokenreview`: seconds an accepted token's verdict is reused (never past its `exp`)",
        default=REVIEW_CACHE_SECONDS,
        ge=0,
        le=300,
    )
    callers_file: Path = setting(
        auth_names.AGENT_CALLERS_FILE,
        "auth",
        "the callers file the operator writes (the agents allowed to delegate to this one),"
        " re-read when it changes; a verified token of a ServiceAccount not listed is 403,"
        " and a missing or invalid file allows no agent",
        default=Path(auth_names.CALLERS_PATH),
    )
    peer_token_file: Path | None = setting(
        auth_names.AGENT_PEER_TOKEN_FILE,
        "auth",
        "the pod's projected service-account token for peers (audience `kaos.dev/agent`),"
        " sent as `X-Agent-Token` on every delegation (A2A and chat) and re-read when"
        " kubelet rotates it; needed when peers verify agent identity",
        default=None,
    )

    user_issuer: str | None = setting(
        auth_names.AGENT_USER_ISSUER,
        "user",
        "the OIDC issuer of end users' tokens (`iss`, an https URL). Set, every end-user call"
        " needs `Authorization: Bearer <token>` (else 401 with an RFC 6750 challenge), the"
        " principal is the token's principal claim, `X-Principal` is refused (400), and the"
        " token is forwarded as `X-User-Token` to the memory service and to peers; keys come"
        " from `AGENT_USER_JWKS_URL`, else the issuer's discovery document",
        default=None,
    )
    user_audience: str | None = setting(
        auth_names.AGENT_USER_AUDIENCE,
        "user",
        "with a user issuer (required there): the audience user tokens must carry (`aud`)",
        default=None,
        min_length=1,
    )
    user_principal_claim: str = setting(
        auth_names.AGENT_USER_PRINCIPAL_CLAIM,
        "user",
        "the claim of a user token that names the principal",
        default=auth_names.DEFAULT_PRINCIPAL_CLAIM,
        min_length=1,
    )
    user_jwks_url: str | None = setting(
        auth_names.AGENT_USER_JWKS_URL,
        "user",
        "where to fetch the user issuer's keys instead of discovery (https). Keys are fetched"
        " on first use and again for an unknown key id at most every 30 s (a key rotated at"
        " the provider is followed without a restart)",
        default=None,
    )
    user_ca_file: Path | None = setting(
        auth_names.AGENT_USER_CA_FILE,
        "user",
        "CA bundle for the user issuer and its keys",
        default=None,
        default_doc="system CAs",
    )
    user_leeway: float = setting(
        auth_names.AGENT_USER_LEEWAY,
        "user",
        "seconds of clock skew tolerated on a user token's `exp`, `nbf` and `iat`",
        default=DEFAULT_LEEWAY,
        ge=0,
        le=300,
    )

    @field_validator("memory_tools", mode="before")
    @classmethod
    def _legacy_memory_tools(cls, value: object) -> object:
        # Pods configured before the tools became a mode carry a boolean.
        if isinstance(value, bool):
            return "all" if value else "none"
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return "all" if value.strip().lower() == "true" else "none"
        return value

    @field_validator("memory_endpoint", "public_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return http_url(value)

    @field_validator("identity")
    @classmethod
    def _agent_identity(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return validate_agent_identity(value)
        except KaosError:
            raise ValueError("must be kaos://agent/<namespace>/<name>") from None

    @model_validator(mode="after")
    def _invariants(self) -> AgentSettings:
        # Parsing here reports malformed lists at load, naming the variable.
        parse_endpoints(self.mcp_servers_raw, variable=env.MCP_SERVERS, require_name=False)
        parse_endpoints(self.sub_agents_raw, variable=env.AGENT_SUB_AGENTS, require_name=True)
        self._check_auth()
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
            if self.memory_tools != "none":
                raise ValueError(
                    f"{env.MEMORY_TOOLS}={self.memory_tools} needs {env.MEMORY_TYPE}=remote"
                )
            if self.memory_max_read_scope != "session":
                raise ValueError(
                    f"{env.MEMORY_MAX_READ_SCOPE}={self.memory_max_read_scope} needs "
                    f"{env.MEMORY_TYPE}=remote"
                )
        return self

    def _check_auth(self) -> None:
        names = auth_names
        if self.user_issuer is not None:
            if self.auth_mode == "off":
                raise ValueError(
                    f"{names.AGENT_USER_ISSUER} needs {names.AGENT_AUTH_MODE} (verified user"
                    " identity builds on verified agent identity)"
                )
            if not self.user_audience:
                raise ValueError(f"{names.AGENT_USER_ISSUER} needs {names.AGENT_USER_AUDIENCE}")
            for variable, url in (
                (names.AGENT_USER_ISSUER, self.user_issuer),
                (names.AGENT_USER_JWKS_URL, self.user_jwks_url),
            ):
                if url is not None and not url.startswith("https://"):
                    raise ValueError(f"{variable} must be an https:// URL")
        if self.auth_mode == "jwks" and not self.auth_issuer:
            raise ValueError(f"{names.AGENT_AUTH_MODE}=jwks needs {names.AGENT_AUTH_ISSUER}")
        if self.auth_mode == "tokenreview" and not self.auth_api_server:
            raise ValueError(
                f"{names.AGENT_AUTH_MODE}=tokenreview needs {names.AGENT_AUTH_API_SERVER}"
            )
        for variable, url in (
            (names.AGENT_AUTH_ISSUER, self.auth_issuer),
            (names.AGENT_AUTH_JWKS_URL, self.auth_jwks_url),
            (names.AGENT_AUTH_API_SERVER, self.auth_api_server),
        ):
            # Keys and TokenReviews (with the agent's own bearer token) travel over TLS only.
            if url is not None and not url.startswith("https://"):
                raise ValueError(f"{variable} must be an https:// URL")

    @property
    def budget(self) -> RunBudget:
        return RunBudget(
            max_tool_calls=self.task_max_tool_calls, max_wall_seconds=self.task_max_wall_seconds
        )

    @property
    def tools(self) -> ToolSettings:
        return ToolSettings(
            servers=parse_endpoints(
                self.mcp_servers_raw, variable=env.MCP_SERVERS, require_name=False
            ),
            timeout_seconds=self.model_timeout_seconds,
        )

    @property
    def delegation(self) -> DelegationSettings:
        return DelegationSettings(
            peers=parse_endpoints(
                self.sub_agents_raw, variable=env.AGENT_SUB_AGENTS, require_name=True
            ),
            max_depth=self.max_delegation_depth,
            timeout_seconds=self.delegation_timeout_seconds,
            token_file=self.peer_token_file,
        )

    @property
    def auth(self) -> CallerAuthSettings:
        return CallerAuthSettings(
            mode=self.auth_mode,
            issuer=self.auth_issuer,
            jwks_url=self.auth_jwks_url,
            api_server=self.auth_api_server,
            ca_file=self.auth_ca_file,
            token_file=self.auth_token_file,
            leeway=self.auth_leeway,
            review_cache_seconds=self.auth_review_cache_seconds,
            callers_file=self.callers_file,
        )

    @property
    def user_auth(self) -> UserAuthSettings | None:
        """How end users' tokens are verified; ``None``: no user identity (X-Principal as sent)."""
        return UserAuthSettings.of(self)

    @property
    def memory(self) -> AgentMemorySettings:
        return AgentMemorySettings(
            type=self.memory_type,
            endpoint=self.memory_endpoint,
            agent_identity=self.identity,
            max_read_scope=self.memory_max_read_scope,
            tools=self.memory_tools,
            failure_mode=self.memory_failure_mode,
            token_budget=self.memory_token_budget,
            top_k=self.memory_top_k,
            timeout_seconds=self.memory_timeout_seconds,
            require_principal=self.memory_require_principal,
            token_file=self.memory_token_file,
        )

    @property
    def autonomous(self) -> AutonomousSettings | None:
        """The autonomous loop's settings; ``None`` when no goal is set."""
        if not self.autonomous_goal:
            return None
        return AutonomousSettings(
            goal=self.autonomous_goal,
            interval_seconds=self.autonomous_interval_seconds,
            max_steps=self.autonomous_max_steps or self.max_steps,
            timeout_seconds=self.autonomous_timeout_seconds,
            owner=self.identity or f"agent:{self.name}",
            session_id=f"autonomous-{self.name}",
        )

    def card_url(self) -> str:
        return self.public_url or f"http://{self._card_host()}:{self.port}"

    def _card_host(self) -> str:
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
