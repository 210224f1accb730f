"""The table ``kaos --help`` is drawn from agrees with the groups it stands for."""

from __future__ import annotations

import importlib

import click
import pytest
from click.testing import CliRunner
from kaos_cli.app import LAZY_COMMANDS, cli


@pytest.mark.parametrize("name", sorted(LAZY_COMMANDS))
def test_the_table_names_the_group_and_its_help(name: str) -> None:
    module, attribute, text = LAZY_COMMANDS[name]
    command = getattr(importlib.import_module(module), attribute)

    assert isinstance(command, click.Command)
    assert command.name == name
    assert command.get_short_help_str(200) == click.Command(name, help=text).get_short_help_str(200)


def test_help_lists_every_command_once_in_order() -> None:
    result = CliRunner().invoke(cli, ["--help"], prog_name="kaos")

    assert result.exit_code == 0
    section = result.output.split("Commands:\n")[1].split("\n\n")[0]
    names = [row.split()[0] for row in section.splitlines()]
    assert names == sorted(set(names))
    assert set(LAZY_COMMANDS) <= set(names)


@pytest.mark.parametrize("width", [60, 100, 200])
def test_the_lazy_help_is_what_the_loaded_groups_would_print(width: int) -> None:
    ctx = click.Context(cli, info_name="kaos")
    for name in LAZY_COMMANDS:
        assert cli.get_command(ctx, name) is not None
    lazy, loaded = click.HelpFormatter(width=width), click.HelpFormatter(width=width)

    cli.format_commands(ctx, lazy)
    click.Group.format_commands(cli, ctx, loaded)

    assert lazy.getvalue() == loaded.getvalue()


def test_an_unknown_command_is_still_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["agnet"], prog_name="kaos")

    assert result.exit_code == 2
    assert "No such command 'agnet'" in result.output
