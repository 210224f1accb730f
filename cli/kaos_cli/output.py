"""What the CLI prints: tables for people, JSON or YAML for scripts (``-o``).

Tables go through rich: aligned columns with upper-case headers, kubectl style, colour
only on a terminal (rich switches it off for pipes and honours ``NO_COLOR`` and
``FORCE_COLOR``), and never wrapped when the output is a pipe, so scripts and tests can
split the lines. Nothing is cut: a message column wraps within the terminal's width.
Colours come from tones (``Toned``), which ``kaos_cli.health`` decides, so a state reads
the same in every view. ``-o json`` and ``-o yaml`` print the underlying documents
unchanged.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TextIO, cast

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

Format = Literal["table", "json", "yaml"]
FORMATS: tuple[Format, ...] = ("table", "json", "yaml")
GAP = 2
# A wrapped column narrower than this reads worse than a long line the terminal folds.
MIN_WRAP = 24
PIPE_WIDTH = 10_000

# The colour of each tone ``kaos_cli.health`` gives a state, the same in every table.
TONE_STYLE = {
    "ok": "green",
    "warn": "yellow",
    "error": "red",
    "progress": "cyan",
    "unknown": "dim",
}


@dataclass(frozen=True)
class Toned:
    """A cell coloured by the tone of what it says (``health.health``,
    ``health.condition_tone``)."""

    value: object
    tone: str


def cell(value: object) -> str:
    """One table cell: ``-`` for nothing, newlines flattened; never shortened."""
    if isinstance(value, Toned):
        return cell(value.value)
    if value is None or value == "":
        return "-"
    return " ".join(str(value).split())


def console(out: TextIO | None = None, *, stderr: bool = False) -> Console:
    """A rich console for ``out``: on a terminal (or with ``FORCE_COLOR``) coloured and as
    wide as the terminal (``COLUMNS``); on a pipe plain and never wrapped."""
    stream = out or (sys.stderr if stderr else sys.stdout)
    made = Console(file=stream, highlight=False, soft_wrap=True)
    if made.is_terminal:
        return made
    return Console(
        file=stream, highlight=False, soft_wrap=True, width=PIPE_WIDTH, color_system=None
    )


def _styled(value: object) -> Text:
    style = TONE_STYLE.get(value.tone, "") if isinstance(value, Toned) else ""
    return Text(cell(value), style=style)


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    out: TextIO | None = None,
    *,
    wrap: Sequence[str] = (),
) -> None:
    """Print an aligned table: upper-case headers, two-space gaps, ``-`` for empty. The
    ``wrap`` columns (messages) wrap within the terminal's width, never cut; every other
    column keeps its width, so a narrow terminal folds the line instead."""
    target = console(out)
    texts = [[_styled(v) for v in row] for row in rows]
    natural = [max([len(h), *(len(r[i].plain) for r in texts)]) for i, h in enumerate(headers)]
    fixed = sum(n + GAP for h, n in zip(headers, natural, strict=True) if h not in wrap)
    wrapped = [h for h in headers if h in wrap]
    room = (target.width - fixed) // len(wrapped) - GAP if wrapped else 0
    fits = sum(natural) + GAP * len(headers) <= target.width
    if not fits and room < MIN_WRAP:
        # Too wide to wrap well: one long line per row, which the terminal folds (rich
        # would otherwise drop or cut columns).
        target = Console(
            file=target.file,
            highlight=False,
            soft_wrap=True,
            width=PIPE_WIDTH,
            force_terminal=target.is_terminal,
            color_system=cast(Any, target.color_system),
        )
    grid = Table(box=None, pad_edge=False, padding=(0, GAP, 0, 0), show_edge=False)
    for header, width in zip(headers, natural, strict=True):
        if header in wrap and room >= MIN_WRAP:
            grid.add_column(header.upper(), header_style="bold", overflow="fold", max_width=room)
        else:
            grid.add_column(header.upper(), header_style="bold", no_wrap=True, min_width=width)
    for row in texts:
        grid.add_row(*row)
    with target.capture() as captured:
        target.print(grid, soft_wrap=False)
    stream = out or sys.stdout
    for line in captured.get().splitlines():
        stream.write(line.rstrip() + "\n")
    stream.flush()


def print_json(document: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json.dumps(document, indent=2, sort_keys=False, default=str) + "\n")


def print_yaml(document: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(yaml.safe_dump(document, sort_keys=False, allow_unicode=True))


def emit(
    fmt: Format,
    document: Any,
    headers: Sequence[str] = (),
    rows: Sequence[Sequence[object]] = (),
    *,
    empty: str | None = None,
    wrap: Sequence[str] = (),
) -> None:
    """``document`` as JSON or YAML, else the table (or ``empty`` when it has no rows)."""
    if fmt == "json":
        print_json(document)
    elif fmt == "yaml":
        print_yaml(document)
    elif not rows and empty:
        print(empty)
    else:
        table(headers, rows, wrap=wrap)


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")


def info(message: str) -> None:
    """A progress or status line for people, on stderr so stdout stays the answer."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
