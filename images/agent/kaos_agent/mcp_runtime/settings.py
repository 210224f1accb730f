"""Settings of the MCP server runtime (``kaos-mcp``), documented and grouped like the agent's."""

from __future__ import annotations

from typing import Any, Literal

from kaos_core import agent_env as env
from kaos_core.settings import EnvSettings
from pydantic import Field

MCP_GROUPS: dict[str, str] = {"server": "Listening", "tools": "Tools"}

# Read only by this runtime (the operator does not set it), so it is named here rather
# than in ``kaos_core.agent_env``.
MCP_MAX_BODY_BYTES = "MCP_MAX_BODY_BYTES"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024


def _setting(name: str, group: str, description: str, **kwargs: Any) -> Any:
    assert group in MCP_GROUPS, group
    return Field(description=description, json_schema_extra={"env": name, "group": group}, **kwargs)


class McpSettings(EnvSettings):
    host: str = _setting(env.MCP_HOST, "server", "listen address", default="0.0.0.0")
    port: int = _setting(env.MCP_PORT, "server", "listen port", default=8000, ge=1, le=65535)
    allowed_hosts: str = _setting(
        env.MCP_ALLOWED_HOSTS,
        "server",
        "comma list of Host headers accepted on `/mcp` (`*`: any, for in-cluster service "
        "names and ports)",
        default="*",
    )
    name: str = _setting(env.MCP_SERVER_NAME, "server", "MCP server name", default="kaos-mcp")
    max_body_bytes: int = _setting(
        MCP_MAX_BODY_BYTES,
        "server",
        "largest request body accepted on `/mcp`, in bytes; a larger one is answered 413 "
        "(a JSON-RPC error) before it is parsed",
        default=DEFAULT_MAX_BODY_BYTES,
        ge=1024,
        le=64 * 1024 * 1024,
    )
    runtime: Literal["python-string"] = _setting(
        env.MCP_RUNTIME, "tools", "the only runtime", default="python-string"
    )
    tools_string: str = _setting(
        env.MCP_TOOLS_STRING,
        "tools",
        "Python source; each public top-level function is a tool (required)",
        default="",
    )

    def allowed_host_list(self) -> list[str]:
        return [h.strip() for h in self.allowed_hosts.split(",") if h.strip()]
