"""The MCP runtime registry (the chart's ``mcpRuntimes``): how to run an MCPServer whose
``spec.runtime`` names a runtime the operator does not build in."""

from __future__ import annotations

import json
import re
from typing import ClassVar, Literal

from kaos_core.settings import SettingsGroup, setting
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

ParamsMode = Literal["env", "file", "args", "none"]

# Runtimes the operator knows without the registry (an MCPServer's spec.runtime).
BUILTIN_RUNTIMES = ("python-string", "custom")


class McpRuntime(BaseModel):
    """One MCP runtime of the registry: how to run a server.

    ``params`` says how an MCPServer's spec.params reaches it: ``env`` (the variable
    ``paramsEnv``), ``file`` (a ConfigMap file at ``paramsPath``), ``args`` (appended to
    args, one per line) or ``none``.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    image: str = Field(min_length=1, max_length=512)
    command: list[str] | None = None
    args: list[str] = Field(default_factory=list)
    port: int = Field(default=8000, ge=1, le=65535)
    path: str = Field(default="/mcp", pattern=r"^/")
    params: ParamsMode = "env"
    params_env: str = Field(default="MCP_PARAMS", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    params_path: str = Field(default="/etc/mcp/params", pattern=r"^/.+/[^/]+$")
    env: dict[str, str] = Field(default_factory=dict)


class McpRuntimes(SettingsGroup):
    """The registry, as the chart renders it."""

    env_prefix: ClassVar[str | None] = "KAOS_"
    title: ClassVar[str] = "MCP runtimes"

    registry: str = setting(
        "the MCP runtime registry as JSON: name -> runtime (image, command, args, port, path,"
        " params, paramsEnv, paramsPath, env)",
        env="MCP_RUNTIMES",
        default="{}",
    )

    def problems(self, prefix: str) -> list[str]:
        # A bad registry stops the operator at start, naming the entry.
        try:
            self.runtimes()
        except ValueError as exc:
            return [str(exc)]
        return []

    def runtimes(self) -> dict[str, McpRuntime]:
        """The registry by runtime name; ``ValueError`` naming the entry when it is bad."""
        variable = self.env_name("registry")
        try:
            raw = json.loads(self.registry or "{}")
        except ValueError:
            raise ValueError(f"{variable} is not JSON") from None
        if not isinstance(raw, dict):
            raise ValueError(f"{variable} must map runtime names to runtimes")
        out = {}
        for name, entry in raw.items():
            if name in BUILTIN_RUNTIMES:
                raise ValueError(f"{variable}: {name} is a built-in runtime")
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 63:
                raise ValueError(f"{variable}: {name!r} is not a runtime name")
            try:
                out[name] = McpRuntime.model_validate(entry)
            except ValidationError as exc:
                first = exc.errors(include_url=False, include_input=False)[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ValueError(f"{variable}: {name}.{where}: {first['msg']}") from None
        return out
