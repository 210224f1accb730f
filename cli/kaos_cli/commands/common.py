"""What every ``kaos`` command shares: ``-n/--namespace``, ``--context``, ``-o``, completion.

``common_options`` adds the three options to a command and hands it a ``Cx`` (the kubectl
binding and the output format) instead; the hidden ``--json`` is the older spelling of
``-o json``, kept so scripts written against the first CLI go on working.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import click
from click.shell_completion import CompletionItem

from kaos_cli.kubectl.sync import Kube
from kaos_cli.output import FORMATS, Format

Command = Callable[..., int]


@dataclass
class Cx:
    """One command's view of the world: where it talks to and how it prints."""

    kube: Kube
    fmt: Format


def _kube_of(ctx: click.Context) -> Kube:
    params = ctx.params
    return Kube(context=params.get("context"), namespace=params.get("namespace"))


def complete_namespaces(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    names = _kube_of(ctx).names("namespaces")
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def complete_resource(resource: str) -> Callable[..., list[CompletionItem]]:
    """Shell completion of the names of ``resource`` objects in the chosen namespace."""

    def complete(
        ctx: click.Context, param: click.Parameter, incomplete: str
    ) -> list[CompletionItem]:
        return [
            CompletionItem(n) for n in _kube_of(ctx).names(resource) if n.startswith(incomplete)
        ]

    return complete


def complete_contexts(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    return [CompletionItem(n) for n in Kube().contexts() if n.startswith(incomplete)]


def common_options(
    *, namespace_help: str = "namespace (default: the context's namespace)"
) -> Callable[[Command], Command]:
    """Add ``-n``, ``--context`` and ``-o`` and pass ``cx`` to the command."""

    def decorate(fn: Command) -> Command:
        @functools.wraps(fn)
        def wrapper(
            *args: Any,
            namespace: str | None,
            context: str | None,
            output: str,
            json_: bool,
            **kwargs: Any,
        ) -> int:
            fmt = cast(Format, "json" if json_ else output)
            return fn(*args, cx=Cx(Kube(context=context, namespace=namespace), fmt), **kwargs)

        decorated: Any = wrapper
        decorated = click.option(
            "--json", "json_", is_flag=True, hidden=True, help="same as -o json"
        )(decorated)
        decorated = click.option(
            "-o",
            "--output",
            type=click.Choice(FORMATS),
            default="table",
            show_default=True,
            help="output format",
        )(decorated)
        decorated = click.option(
            "--context",
            default=None,
            metavar="NAME",
            shell_complete=complete_contexts,
            help="kubeconfig context (default: the current one)",
        )(decorated)
        decorated = click.option(
            "-n",
            "--namespace",
            default=None,
            metavar="NS",
            shell_complete=complete_namespaces,
            help=namespace_help,
        )(decorated)
        return cast(Command, decorated)

    return decorate


def all_namespaces_option(fn: Command) -> Command:
    option = click.option("-A", "--all-namespaces", is_flag=True, help="every namespace, not one")
    return option(fn)


CONTEXT_SETTINGS: dict[str, Any] = {
    "help_option_names": ["-h", "--help"],
    "max_content_width": 100,
    "terminal_width": 100,
}
