"""``kaos mcp``: the shared commands plus ``deploy`` of a python-string MCPServer whose
tools are the functions of a source file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from kaos_cli.commands.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.commands.deploy import deploy, deploy_options
from kaos_cli.commands.resources import add_resource_commands
from kaos_cli.kinds import MCP
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError


@click.group(
    "mcp",
    context_settings=CONTEXT_SETTINGS,
    help="MCPServers: tool servers agents call (python-string runtime).",
)
def mcp_group() -> None:
    pass


add_resource_commands(mcp_group, MCP)


@mcp_group.command(
    "deploy",
    help="Create or update an MCPServer whose tools are the functions of --source FILE "
    "(python-string runtime; each function's docstring is its tool's description).",
)
@click.argument("name", required=False)
@click.option("--source", type=click.Path(dir_okay=False), help="Python file with the tools")
@click.option("--params", default=None, help="the tools' Python source, inline")
@deploy_options
@common_options()
def mcp_deploy(
    cx: Cx,
    name: str | None,
    source: str | None,
    params: str | None,
    file_: str | None,
    wait: bool,
    timeout: float,
    dry_run: bool,
) -> int:
    def build() -> dict[str, Any]:
        text = params
        if source:
            try:
                text = Path(source).read_text()
            except OSError as exc:
                raise CliError(f"cannot read {source}: {exc.strerror}", EXIT_ENVIRONMENT) from exc
        if not text:
            raise CliError("kaos mcp deploy needs --source FILE or --params", EXIT_ENVIRONMENT)
        return {"runtime": "python-string", "params": text}

    return deploy(MCP, cx, name, file_, build, wait=wait, timeout=timeout, dry_run=dry_run)
