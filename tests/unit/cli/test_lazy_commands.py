"""The tables ``kaos --help`` and ``kaos agent --help`` are drawn from agree with the
commands they stand for."""

from __future__ import annotations

import importlib

import click
import pytest
from click.testing import CliRunner
from kaos_cli.app import LAZY_COMMANDS, cli
from kaos_cli.commands.agent import AGENT_COMMANDS, agent_group
from kaos_cli.lazy import Lazy, LazyGroup

TABLES: dict[str, tuple[LazyGroup, dict[str, Lazy]]] = {
    "kaos": (cli, LAZY_COMMANDS),
    "kaos agent": (agent_group, AGENT_COMMANDS),
}
ENTRIES = [(path, name) for path, (_, table) in TABLES.items() for name in sorted(table)]


@pytest.mark.parametrize(("path", "name"), ENTRIES)
def test_the_table_names_the_command_and_its_help(path: str, name: str) -> None:
    module, attribute, text = TABLES[path][1][name]
    command = getattr(importlib.import_module(module), attribute)

    assert isinstance(command, click.Command)
    assert command.name == name
    assert command.get_short_help_str(200) == click.Command(name, help=text).get_short_help_str(200)


@pytest.mark.parametrize("path", sorted(TABLES))
def test_help_lists_every_command_once_in_order(path: str) -> None:
    result = CliRunner().invoke(cli, [*path.split()[1:], "--help"], prog_name="kaos")

    assert result.exit_code == 0
    section = result.output.split("Commands:\n")[1].split("\n\n")[0]
    names = [row.split()[0] for row in section.splitlines() if not row.startswith("    ")]
    assert names == sorted(set(names))
    assert set(TABLES[path][1]) <= set(names)


@pytest.mark.parametrize("width", [60, 100, 200])
@pytest.mark.parametrize("path", sorted(TABLES))
def test_the_lazy_help_is_what_the_loaded_commands_would_print(path: str, width: int) -> None:
    group, table = TABLES[path]
    ctx = click.Context(group, info_name=path.split()[-1])
    for name in table:
        assert group.get_command(ctx, name) is not None
    lazy, loaded = click.HelpFormatter(width=width), click.HelpFormatter(width=width)

    group.format_commands(ctx, lazy)
    click.Group.format_commands(group, ctx, loaded)

    assert lazy.getvalue() == loaded.getvalue()


@pytest.mark.parametrize("argv", [["agnet"], ["agent", "invok"]])
def test_an_unknown_command_is_still_a_usage_error(argv: list[str]) -> None:
    result = CliRunner().invoke(cli, argv, prog_name="kaos")

    assert result.exit_code == 2
    assert f"No such command '{argv[-1]}'" in result.output
