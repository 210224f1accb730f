"""The ``kaos`` command tree and how its errors reach the user.

Every command returns its exit status. ``run`` turns a ``CliError`` into ``error: ...`` on
stderr (one line, or a first line with what follows indented under it), a usage mistake
into one line naming the help to read (exit 2), a group given no command into its help
(exit 2, as click does), and Ctrl-C into exit 130; no traceback reaches the user. The
exit statuses are documented in docs/cli.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
from click.shell_completion import get_completion_class

from kaos_cli.commands.common import CONTEXT_SETTINGS
from kaos_cli.lazy import Lazy, LazyGroup
from kaos_cli.tools import EXIT_ENVIRONMENT, EXIT_INTERRUPTED, CliError, without_prefix

PROG = "kaos"
COMPLETE_VAR = "_KAOS_COMPLETE"

# The command groups, loaded when a command line names one: ``kaos --help`` imports none
# of them (the A2A SDK, aiohttp and the resource models take most of a second), so it
# answers at once. name: (module, attribute, the one-line help ``kaos --help`` shows,
# equal to the group's own first help line; a unit test keeps the two the same).
LAZY_COMMANDS: dict[str, Lazy] = {
    "agent": Lazy(
        "kaos_cli.commands.agent",
        "agent_group",
        "Agents: list, inspect, deploy, follow and talk to them; grant who may talk to them.",
    ),
    "modelapi": Lazy(
        "kaos_cli.commands.modelapi",
        "modelapi_group",
        "ModelAPIs: the model endpoints agents and memory stores use "
        "(LiteLLM proxy or hosted Ollama).",
    ),
    "mcp": Lazy(
        "kaos_cli.commands.mcp",
        "mcp_group",
        "MCPServers: tool servers agents call (python-string runtime).",
    ),
    "memorystore": Lazy(
        "kaos_cli.commands.memorystore",
        "memorystore_group",
        "MemoryStores: the tiered memory service agents remember through.",
    ),
    "a2a": Lazy(
        "kaos_cli.commands.a2a",
        "a2a_group",
        "A2A tasks of an agent: send a message, get, cancel or list tasks.",
    ),
    "memory": Lazy(
        "kaos_cli.commands.memory",
        "memory_group",
        "Inspect or erase what a MemoryStore remembers (the administrator's view).",
    ),
    "samples": Lazy(
        "kaos_cli.commands.samples",
        "samples_group",
        "The sample manifests shipped with KAOS: list, deploy or delete them.",
    ),
    "system": Lazy(
        "kaos_cli.commands.system",
        "system_group",
        "Install, upgrade, uninstall KAOS in the cluster and check its health.",
    ),
    "usage": Lazy(
        "kaos_cli.commands.usage",
        "usage_command",
        "Tokens agents used, by agent, user or UTC day (for chargeback).",
    ),
    "ui": Lazy(
        "kaos_cli.ui.command",
        "ui_command",
        "Open the KAOS console: every agent, ModelAPI, MCP server and MemoryStore live, "
        "chat with an agent, look inside a MemoryStore.",
    ),
}


@click.group(
    PROG,
    cls=LazyGroup,
    lazy_commands=LAZY_COMMANDS,
    context_settings=CONTEXT_SETTINGS,
    help="KAOS: run AI agents on Kubernetes. Uses your kubectl and helm: every command takes "
    "-n/--namespace and --context (default: the current kubeconfig context) and -o "
    "table|json|yaml.",
    epilog="Run 'kaos COMMAND --help' for a command's options. Shell completion: "
    'eval "$(kaos completion bash)".',
)
@click.version_option(package_name="kaos-tools", prog_name=PROG, message="%(prog)s %(version)s")
def cli() -> None:
    pass


@cli.command(
    "completion",
    help="Print the shell completion script (commands, options and resource names from the "
    'cluster). bash: eval "$(kaos completion bash)"; zsh: eval "$(kaos completion zsh)".',
)
@click.argument("shell", type=click.Choice(["bash", "zsh"]))
def completion_cmd(shell: str) -> int:
    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - both are built into click
        raise CliError(f"no completion for {shell}", EXIT_ENVIRONMENT)
    sys.stdout.write(cls(cli, {}, PROG, COMPLETE_VAR).source())
    return 0


def _usage_line(exc: click.UsageError) -> str:
    path = exc.ctx.command_path if exc.ctx is not None else PROG
    message = " ".join(exc.format_message().split())
    return error_text(f"{message} (see: {path} --help)")


def error_text(message: str) -> str:
    """The one way an error reaches the user: ``error: `` and the first line (without a
    tool's own ``error:``), then any further lines indented under it."""
    lines = [ln.rstrip() for ln in message.strip().splitlines() if ln.strip()] or ["failed"]
    rest = [ln if ln.startswith(" ") else f"  {ln}" for ln in lines[1:]]
    return "\n".join([f"error: {without_prefix(lines[0])}", *rest])


def run(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name=PROG, standalone_mode=False)
    except CliError as exc:
        sys.stdout.flush()
        print(error_text(exc.message), file=sys.stderr)
        return exc.exit_code
    except click.exceptions.NoArgsIsHelpError as exc:
        # A group without a command: its help, as click prints it (usage, exit 2).
        sys.stdout.flush()
        exc.show()
        return EXIT_ENVIRONMENT
    except click.UsageError as exc:
        sys.stdout.flush()
        print(_usage_line(exc), file=sys.stderr)
        return EXIT_ENVIRONMENT
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except click.ClickException as exc:
        print(error_text(exc.format_message()), file=sys.stderr)
        return exc.exit_code
    if isinstance(result, int):
        return result
    return 0
