"""``kaos agent``: the shared commands (list, get, describe, logs, wait, delete), ``deploy``,
and the commands that reach a running agent, imported only when named (``AGENT_COMMANDS``):
talking to it (``agent_talk``), who may (``agent_access``), its runs waiting for a decision
(``agent_approvals``) and its audit trail (``agent_audit``).
"""

from __future__ import annotations

from typing import Any

import click

from kaos_cli.commands.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.commands.deploy import deploy, deploy_options
from kaos_cli.commands.resources import add_resource_commands
from kaos_cli.kinds import AGENT
from kaos_cli.lazy import Lazy, LazyGroup
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError

_TALK, _ACCESS = "kaos_cli.commands.agent_talk", "kaos_cli.commands.agent_access"
_APPROVALS, _AUDIT = "kaos_cli.commands.agent_approvals", "kaos_cli.commands.agent_audit"
# Each help line equal to its command's own (a unit test keeps them so).
AGENT_COMMANDS: dict[str, Lazy] = {
    "invoke": Lazy(_TALK, "invoke_cmd", "Send one message and print the answer (for scripts)."),
    "chat": Lazy(
        _TALK,
        "chat_cmd",
        "Talk to an agent interactively: answers stream as they are written, one session "
        "id for the whole run (the agent remembers the conversation). /exit or Ctrl-D ends.",
    ),
    "tools": Lazy(
        _TALK,
        "tools_cmd",
        "The tools an agent can call: its MCP servers' tools, its delegation peers and its "
        "memory tools, as the running agent advertises them in its card; from the Agent's "
        "spec when the agent cannot be reached.",
    ),
    "grant": Lazy(
        _ACCESS,
        "grant_cmd",
        "Let a user (or --group) talk to an agent: a RoleBinding allowing create on its "
        "agents/invoke (posture.userRbac). Names are the Kubernetes names, prefixes included.",
    ),
    "revoke": Lazy(
        _ACCESS,
        "revoke_cmd",
        "Undo kaos agent grant: delete the RoleBinding it wrote for the user (or --group).",
    ),
    "who-can": Lazy(
        _ACCESS,
        "who_can_cmd",
        "The users and groups bound to talk to an agent: kaos agent grant's RoleBindings "
        "and bindings of the chart's ClusterRole (other RBAC may also grant it).",
    ),
    "approvals": Lazy(
        _APPROVALS, "approvals_cmd", "The agent's runs waiting for an approval decision."
    ),
    "approve": Lazy(
        _APPROVALS,
        "approve_cmd",
        "Approve a paused run's pending calls: they run, and the run goes on.",
    ),
    "deny": Lazy(
        _APPROVALS,
        "deny_cmd",
        "Deny a paused run's pending calls: they do not run; the model is told.",
    ),
    "audit": Lazy(
        _AUDIT,
        "audit_cmd",
        "The agent's audit trail: its tool calls, delegations and approval decisions, "
        "oldest first. --since/--until take a relative time (30m, 12h, 7d), a date "
        "(YYYY-MM-DD, UTC), an RFC 3339 time or epoch seconds.",
    ),
}


@click.group(
    "agent",
    cls=LazyGroup,
    lazy_commands=AGENT_COMMANDS,
    context_settings=CONTEXT_SETTINGS,
    help="Agents: list, inspect, deploy, follow and talk to them; grant who may talk to them.",
)
def agent_group() -> None:
    pass


add_resource_commands(agent_group, AGENT)


@agent_group.command(
    "deploy",
    help="Create or update an Agent. --memorystore makes its memory remote; --access lets it "
    "delegate to other agents.",
)
@click.argument("name", required=False)
@click.option("--modelapi", default=None, help="ModelAPI serving its model (required)")
@click.option("--model", default=None, help="model name, e.g. openai/gpt-4o-mini")
@click.option("--mcp", "mcp_servers", multiple=True, help="MCPServer it may use (repeatable)")
@click.option("--access", multiple=True, help="agent it may delegate to (repeatable)")
@click.option("--instructions", default=None, help="system instructions")
@click.option("--description", default=None, help="what it does (its A2A card)")
@click.option("--memorystore", default=None, help="remember through this MemoryStore")
@click.option("--memory-tools", is_flag=True, help="offer search_memory/save_memory as tools")
@click.option(
    "--expose/--no-expose", default=True, show_default=True, help="other agents may delegate to it"
)
@deploy_options
@common_options()
def agent_deploy(
    cx: Cx,
    name: str | None,
    modelapi: str | None,
    model: str | None,
    mcp_servers: tuple[str, ...],
    access: tuple[str, ...],
    instructions: str | None,
    description: str | None,
    memorystore: str | None,
    memory_tools: bool,
    expose: bool,
    file_: str | None,
    wait: bool,
    timeout: float,
    dry_run: bool,
) -> int:
    def build() -> dict[str, Any]:
        if not modelapi:
            raise CliError("kaos agent deploy needs --modelapi NAME", EXIT_ENVIRONMENT)
        if memory_tools and not memorystore:
            raise CliError("--memory-tools needs --memorystore", EXIT_ENVIRONMENT)
        config: dict[str, Any] = {}
        if instructions:
            config["instructions"] = instructions
        if description:
            config["description"] = description
        if memorystore:
            config["memory"] = {
                "type": "remote",
                "memoryStore": memorystore,
                **({"tools": "all"} if memory_tools else {}),
            }
        body: dict[str, Any] = {"modelAPI": modelapi}
        if model:
            body["model"] = model
        if mcp_servers:
            body["mcpServers"] = list(mcp_servers)
        body["agentNetwork"] = {"expose": expose, **({"access": list(access)} if access else {})}
        if config:
            body["config"] = config
        return body

    return deploy(AGENT, cx, name, file_, build, wait=wait, timeout=timeout, dry_run=dry_run)
