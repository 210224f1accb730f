"""The agent runtime's settings: one environment-backed object, validated before start.

Variable names come from ``kaos_core.agent_env`` (the operator writes the same names); the
caller and user identity (``AGENT_AUTH_*``, ``AGENT_USER_*``) are the groups of
``kaos_core.settings.auth`` under the prefix ``AGENT_``. Each concern is a group, the typed
object one component is handed (``model``, ``budget``, ``delegation``, ``memory``, ...);
``tools`` and ``autonomous`` combine two groups. Invariants between settings (remote memory
needs an endpoint, memory tools need remote memory, ...) are checked at load, so a
contradictory pod fails at start with one readable line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from kaos_core import agent_env as env
from kaos_core.auth import names as auth_names
from kaos_core.auth.config import UserAudience
from kaos_core.http.limits import HttpLimits
from kaos_core.settings import group
from kaos_core.settings.auth import VerifiedIdentity
from kaos_core.telemetry.settings import TelemetrySettings

from kaos_agent.settings.access import UserRbac
from kaos_agent.settings.approvals import ApprovalSettings
from kaos_agent.settings.audit import AuditSettings
from kaos_agent.settings.autonomous import AutonomousMode, AutonomousSettings
from kaos_agent.settings.budgets import TokenBudgets
from kaos_agent.settings.identity import AgentIdentity, AgentServer
from kaos_agent.settings.memory import AgentMemorySettings
from kaos_agent.settings.model import ModelSettings
from kaos_agent.settings.run import DelegationSettings, McpServers, RunBudget, ToolSettings
from kaos_agent.settings.tasks import TaskStoreSettings
from kaos_agent.settings.triggers import TriggerSettings


class AgentSettings(VerifiedIdentity):
    """Every setting of one agent pod; see ``kaos_core.agent_env`` for the names."""

    env_prefix: ClassVar[str] = "AGENT_"
    notes: ClassVar[Mapping[str, str]] = {
        "AGENT_AUTH_MODE": "On, a request carrying `X-Agent-Token` (the calling agent's token,"
        " audience `kaos.dev/agent`) is verified, and a request that claims to be a"
        " delegation (`X-Agent-Identity`, or a delegation depth above 0) without one is 401;"
        " a request with neither is an end user's and proceeds unverified. `off`:"
        " delegations are not verified",
        "AGENT_CALLERS_FILE": "Here: the agents allowed to delegate to this one",
        "AGENT_USER_ISSUER": "Set, every end-user call needs `Authorization: Bearer <token>`"
        " (else 401 with an RFC 6750 challenge), the principal is the token's principal"
        " claim, `X-Principal` is refused (400), and the token is forwarded as"
        " `X-User-Token` to the memory service and to peers; keys come from"
        " `AGENT_USER_JWKS_URL`, else the issuer's discovery document",
    }

    agent: AgentIdentity = group(AgentIdentity.title)
    server: AgentServer = group(AgentServer.title)
    model: ModelSettings = group(ModelSettings.title)
    budget: RunBudget = group(RunBudget.title)
    tokens: TokenBudgets = group(TokenBudgets.title)
    mcp: McpServers = group(McpServers.title)
    delegation: DelegationSettings = group(DelegationSettings.title)
    memory: AgentMemorySettings = group(AgentMemorySettings.title)
    autonomous_mode: AutonomousMode = group(AutonomousMode.title)
    task_store: TaskStoreSettings = group(TaskStoreSettings.title)
    webhooks: TriggerSettings = group(TriggerSettings.title)
    audit: AuditSettings = group(AuditSettings.title)
    approvals: ApprovalSettings = group(ApprovalSettings.title)
    limits: HttpLimits = group(HttpLimits.title)
    telemetry: TelemetrySettings = group(TelemetrySettings.title)
    user_rbac: UserRbac = group(UserRbac.title)

    def problems(self) -> list[str]:
        found = super().problems()
        if self.memory.type == "remote" and self.agent.identity is None:
            if self.memory.require_agent_identity:
                found.append(f"{env.MEMORY_REQUIRE_AGENT_IDENTITY}=true needs {env.AGENT_IDENTITY}")
            if self.memory.max_read_scope == "agent":
                found.append(f"{env.MEMORY_MAX_READ_SCOPE}=agent needs {env.AGENT_IDENTITY}")
        if self.users.issuer and self.agent.identity is None and per_agent(self.users.audience):
            # The agent's own audience is the template rendered with its namespace and name.
            found.append(f"a per-agent {auth_names.AGENT_USER_AUDIENCE} needs {env.AGENT_IDENTITY}")
        if self.user_rbac.enabled:
            # Whom to ask (the API server), about whom (verified users) and what (this Agent).
            needs = {
                auth_names.AGENT_USER_ISSUER: self.users.issuer,
                auth_names.AGENT_AUTH_API_SERVER: self.callers.api_server,
                env.AGENT_IDENTITY: self.agent.identity,
            }
            found += [
                f"{auth_names.AGENT_RBAC}=true needs {name}"
                for name, value in needs.items()
                if not value
            ]
        return found

    @property
    def tools(self) -> ToolSettings:
        """The MCP servers, connected with the model's timeout."""
        return ToolSettings(
            servers=self.mcp.servers,
            timeout_seconds=self.model.timeout_seconds,
            token_file=self.mcp.token_file,
        )

    @property
    def autonomous(self) -> AutonomousSettings | None:
        """The autonomous loop's settings; ``None`` when no goal is set."""
        mode = self.autonomous_mode
        if not mode.goal:
            return None
        return AutonomousSettings(
            goal=mode.goal,
            interval_seconds=mode.interval_seconds,
            max_steps=mode.max_steps or self.model.max_steps,
            timeout_seconds=mode.timeout_seconds,
            owner=self.agent.identity or f"agent:{self.agent.name}",
            session_id=f"autonomous-{self.agent.name}",
        )


def per_agent(audience: str | None) -> bool:
    """Whether ``audience`` is a per-agent template (a malformed one is its own problem)."""
    try:
        return audience is not None and UserAudience(audience).per_agent
    except ValueError:
        return False


# The groups the README's tables document, in order, by title (the connection limits and
# tracing every server reads are documented once, on their own pages).
GROUPS: dict[str, str] = {
    "agent": AgentIdentity.title,
    "server": AgentServer.title,
    "model": ModelSettings.title,
    "budget": RunBudget.title,
    "tokens": TokenBudgets.title,
    "mcp": McpServers.title,
    "delegation": DelegationSettings.title,
    "memory": AgentMemorySettings.title,
    "autonomous_mode": AutonomousMode.title,
    "task_store": TaskStoreSettings.title,
    "webhooks": TriggerSettings.title,
    "audit": AuditSettings.title,
    "approvals": ApprovalSettings.title,
    "callers": "Verified agent identity (delegation)",
    "users": "Verified user identity",
    "user_rbac": UserRbac.title,
}
