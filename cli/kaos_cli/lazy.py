"""click groups whose commands are imported when a command line names them.

Talking to an agent, its approvals and its audit trail need the A2A SDK, aiohttp and the
agent's clients, which take most of a second to import; listing or deploying resources
needs none of them. A ``LazyGroup`` holds a table of such commands (module, attribute and
the one-line help its ``--help`` shows) and imports one only when it is asked for; its
help is drawn from the table. The command's own help is the same text (a unit test keeps
each table and its commands in agreement).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, NamedTuple

import click


class Lazy(NamedTuple):
    module: str
    attribute: str
    help: str


class LazyGroup(click.Group):
    """click's documented lazy-loading group: the commands of ``lazy_commands`` import on
    first use (``@click.group(cls=LazyGroup, lazy_commands=...)``)."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, Lazy], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy = self.lazy_commands.get(cmd_name)
        if lazy is not None and cmd_name not in self.commands:
            command = getattr(importlib.import_module(lazy.module), lazy.attribute)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # As click.Group.format_commands, with the lazy commands' help from the table.
        shown = {
            n: c for n, c in self.commands.items() if n not in self.lazy_commands and not c.hidden
        }
        shown |= {n: click.Command(n, help=lazy.help) for n, lazy in self.lazy_commands.items()}
        limit = formatter.width - 6 - max(map(len, shown), default=0)
        rows = [(name, shown[name].get_short_help_str(limit)) for name in sorted(shown)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
