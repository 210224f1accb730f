"""Settings of the MCP server runtime (``kaos-mcp``), grouped and documented like the
agent's: where it listens, which tools it serves, and the connection limits and tracing
every KAOS server reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from kaos_core import agent_env as env
from kaos_core.auth import names as auth_names
from kaos_core.http.limits import HttpLimits
from kaos_core.settings import ServiceSettings, SettingsGroup, group, setting
from kaos_core.settings.auth import CallerAuth
from kaos_core.telemetry.settings import TelemetrySettings

# Read only by this runtime (the operator does not set it), so it is named here rather
# than in ``kaos_core.agent_env``.
MCP_MAX_BODY_BYTES = "MCP_MAX_BODY_BYTES"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024


class McpServer(SettingsGroup):
    """Where the runtime listens, under which name, and what requests it accepts."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Listening"

    host: str = setting("listen address", env=env.MCP_HOST, default="0.0.0.0")
    port: int = setting("listen port", env=env.MCP_PORT, default=8000, ge=1, le=65535)
    allowed_hosts: str = setting(
        "comma list of Host headers accepted on `/mcp` (`*`: any, for in-cluster service "
        "names and ports)",
        env=env.MCP_ALLOWED_HOSTS,
        default="*",
    )
    name: str = setting("MCP server name", env=env.MCP_SERVER_NAME, default="kaos-mcp")
    max_body_bytes: int = setting(
        "largest request body accepted on `/mcp`, in bytes; a larger one is answered 413 "
        "(a JSON-RPC error) before it is parsed",
        env=MCP_MAX_BODY_BYTES,
        default=DEFAULT_MAX_BODY_BYTES,
        ge=1024,
        le=64 * 1024 * 1024,
    )

    def allowed_host_list(self) -> list[str]:
        return [h.strip() for h in self.allowed_hosts.split(",") if h.strip()]


class McpTools(SettingsGroup):
    """The tools the runtime serves."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Tools"

    runtime: Literal["python-string"] = setting(
        "the only runtime", env=env.MCP_RUNTIME, default="python-string"
    )
    tools_string: str = setting(
        "Python source; each public top-level function is a tool (required)",
        env=env.MCP_TOOLS_STRING,
        default="",
    )


class McpLister(SettingsGroup):
    """Who may list the tools without being a caller of them."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Tool listing"

    lister: str | None = setting(
        "with `MCP_AUTH_MODE` on: the ServiceAccount (`namespace/name`) whose verified token"
        " may list the tools (`initialize`, `tools/list`, `ping`, notifications) but call"
        " none: the operator's, for `status.availableTools`",
        env=auth_names.MCP_AUTH_LISTER,
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$",
    )

    def service_account(self) -> tuple[str, str] | None:
        if self.lister is None:
            return None
        namespace, _, name = self.lister.partition("/")
        return namespace, name


class McpSettings(ServiceSettings):
    """Every setting of one ``kaos-mcp`` pod."""

    env_prefix: ClassVar[str] = "MCP_"
    notes: ClassVar[Mapping[str, str]] = {
        "MCP_AUTH_MODE": "On, every `/mcp` request needs `X-Agent-Token` (audience"
        " `kaos.dev/mcp`) of an agent listed in `MCP_CALLERS_FILE` (else 401/403, nothing"
        " runs); `/healthz`, `/readyz` and `/metrics` stay open",
        "MCP_CALLERS_FILE": "Here: the Agents that list this MCPServer in `mcpServers`",
    }

    server: McpServer = group(McpServer.title)
    tools: McpTools = group(McpTools.title)
    callers: CallerAuth = group(CallerAuth.title)
    listing: McpLister = group(McpLister.title)
    limits: HttpLimits = group(HttpLimits.title)
    telemetry: TelemetrySettings = group(TelemetrySettings.title)

    def problems(self) -> list[str]:
        if self.listing.lister is not None and self.callers.mode == "off":
            return [f"{auth_names.MCP_AUTH_LISTER} needs {auth_names.MCP_AUTH_MODE}"]
        return []


# The groups the README's tables document, in order, by title.
MCP_GROUPS: dict[str, str] = {
    "server": McpServer.title,
    "tools": McpTools.title,
    "callers": "Verified agent identity (callers)",
    "listing": McpLister.title,
}
