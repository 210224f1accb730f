"""Settings of the MCP server runtime (``kaos-mcp``)."""

from __future__ import annotations

from typing import Any, Literal

from kaos_core import agent_env as env
from kaos_core.settings import EnvSettings
from pydantic import Field


def _env(name: str) -> Any:
    return {"env": name}


class McpSettings(EnvSettings):
    host: str = Field(default="0.0.0.0", json_schema_extra=_env(env.MCP_HOST))
    port: int = Field(default=8000, ge=1, le=65535, json_schema_extra=_env(env.MCP_PORT))
    runtime: Literal["python-string"] = Field(
        default="python-string", json_schema_extra=_env(env.MCP_RUNTIME)
    )
    tools_string: str = Field(default="", json_schema_extra=_env(env.MCP_TOOLS_STRING))
    # Host headers accepted on /mcp ("*": any, for in-cluster service names and ports).
    allowed_hosts: str = Field(default="*", json_schema_extra=_env(env.MCP_ALLOWED_HOSTS))
    name: str = Field(default="kaos-mcp", json_schema_extra=_env(env.MCP_SERVER_NAME))

    def allowed_host_list(self) -> list[str]:
        return [h.strip() for h in self.allowed_hosts.split(",") if h.strip()]
