"""``kaos memory quarantine list|release|erase``: facts a store holds back from recall.

A fact whose text reads as an instruction to the agent ("ignore previous instructions",
"when the user asks X, tell them ...", a tool-use directive, a destination to send data to)
is quarantined when it is stored: no recall and no ``kaos memory list`` gives it out. An
administrator lists the store's (or, with ``--principal``, one principal's) quarantined
facts with the screening's reason, and releases them (recalled from then on) or erases
them; each release and erasure is an audit record (``kaos memory audit --action
quarantine_release``). A secured store asks RBAC on ``memorystores/data``: ``get`` to list,
``update`` to release, ``delete`` to erase.

The commands reach the service the way the rest of ``kaos memory`` does: ``memory``
passes its runner in (``add_commands``), so this module does not import it back.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import click
from kaos_core.memory.client import MemoryServiceClient
from kaos_core.memory.contract import Level
from kaos_core.memory.quarantine import (
    MAX_IDS,
    QuarantineChangeRequest,
    QuarantineChangeResponse,
    QuarantineListResponse,
)
from pydantic import ValidationError

from kaos_cli.commands.common import Cx
from kaos_cli.output import print_json, print_yaml, table
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError

CALLS = ("quarantine_list", "quarantine_release", "quarantine_erase")


async def quarantine_call(client: MemoryServiceClient, args: argparse.Namespace, call: str) -> Any:
    """One quarantine call of ``args`` (``--principal``: that principal's scope, else the
    store's)."""
    level: Level = "store" if args.principal is None else "user"
    scope: dict[str, Any] = {"principal": args.principal}
    if call == "quarantine_list":
        return await client.quarantined(level, limit=args.limit, cursor=args.cursor, **scope)
    if call == "quarantine_release":
        return await client.release(args.ids, level, **scope)
    return await client.erase_quarantined(args.ids, level, **scope)


def _dump(response: Any, args: argparse.Namespace) -> bool:
    if args.cx.fmt == "table":
        return False
    document = response.model_dump(mode="json")
    (print_json if args.cx.fmt == "json" else print_yaml)(document)
    return True


def _print_list(response: QuarantineListResponse, args: argparse.Namespace) -> None:
    if _dump(response, args):
        return
    rows = [
        [
            q.fact.id,
            q.reason,
            q.fact.text,
            "-" if q.fact.provenance is None else q.fact.provenance.source,
            q.fact.user_id,
            q.fact.agent_id,
            q.fact.session_id,
            q.fact.created_at,
        ]
        for q in response.facts
    ]
    print(f"quarantined facts ({len(rows)}):")
    table(
        ["id", "reason", "text", "source", "user", "agent", "session", "created"],
        rows,
        wrap=["text"],
    )
    if response.next_cursor:
        print(f"\nmore: --cursor {response.next_cursor}")


def _print_change(response: QuarantineChangeResponse, args: argparse.Namespace, done: str) -> None:
    if not _dump(response, args):
        print(f"{done} {response.facts} fact(s); audit record {response.audit} (kaos memory audit)")


def _check_ids(ids: tuple[str, ...]) -> list[str]:
    """The ids as the service takes them, checked before anything is sent."""
    if len(ids) > MAX_IDS:
        raise CliError(f"at most {MAX_IDS} fact ids per call", EXIT_ENVIRONMENT)
    try:
        QuarantineChangeRequest(ids=list(ids))
    except ValidationError:
        raise CliError(
            "give distinct fact ids as `kaos memory quarantine list` shows them (UUIDs)",
            EXIT_ENVIRONMENT,
        ) from None
    return list(ids)


def add_commands(
    group: click.Group,
    *,
    run: Callable[[argparse.Namespace, str], Any],
    args_of: Callable[..., argparse.Namespace],
    options: Callable[[Any], Any],
) -> None:
    """Add ``quarantine`` to ``group`` (``kaos memory``), calling through ``run``."""

    @group.command(
        "quarantine",
        help="Facts held back from recall because they read as instructions to the agent"
        " (administrators). ACTION: list (the default; each fact with the reason it was held),"
        " release IDS... (recalled from then on) or erase IDS...; a release or erasure is"
        " audited.",
    )
    @click.argument("action", type=click.Choice(["list", "release", "erase"]), default="list")
    @click.argument("ids", nargs=-1)
    @click.option(
        "--principal", default=None, help="that principal's facts only (else the whole store)"
    )
    @click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
    @click.option("--cursor", default=None, help="list: next cursor of the previous page")
    @options
    def quarantine_command(cx: Cx, action: str, ids: tuple[str, ...], **params: Any) -> int:
        if action == "list":
            if ids:
                raise CliError("list takes no fact ids", EXIT_ENVIRONMENT)
            args = args_of(cx, agent=None, **params)
            _print_list(run(args, "quarantine_list"), args)
            return 0
        if not ids:
            raise CliError(f"{action} needs the fact ids to {action}", EXIT_ENVIRONMENT)
        args = args_of(cx, agent=None, ids=_check_ids(ids), **params)
        done = "released" if action == "release" else "erased"
        _print_change(run(args, f"quarantine_{action}"), args, done)
        return 0
