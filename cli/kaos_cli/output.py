"""What the CLI prints: tables for people, JSON or YAML for scripts (``-o``).

Tables go through rich: aligned columns with upper-case headers, kubectl style, colour
only on a terminal (rich switches it off for pipes and honours ``NO_COLOR``), and never
wrapped when the output is a pipe, so scripts and tests can split the lines. ``-o json``
and ``-o yaml`` print the underlying documents unchanged.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, Literal, TextIO

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

Format = Literal["table", "json", "yaml"]
FORMATS: tuple[Format, ...] = ("table", "json", "yaml")
MAX_CELL = 60
GAP = 2


def cell(value: object, width: int = MAX_CELL) -> str:
    """One table cell: ``-`` for nothing, newlines flattened, long text shortened."""
    if value is None or value == "":
        return "-"
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def console(out: TextIO | None = None, *, stderr: bool = False) -> Console:
    stream = out or (sys.stderr if stderr else sys.stdout)
    terminal = stream.isatty()
    return Console(
        file=stream,
        highlight=False,
        soft_wrap=True,
        width=None if terminal else 10_000,
        color_system="auto" if terminal else None,
    )


_PHASE_STYLE = {"Ready": "green", "True": "green", "Waiting": "yellow", "Pending": "yellow"}


def _styled(text: str) -> Text:
    style = _PHASE_STYLE.get(text) or ("red" if text in ("Failed", "False") else "")
    return Text(text, style=style)


def table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], out: TextIO | None = None
) -> None:
    """Print an aligned table: upper-case headers, two-space gaps, ``-`` for empty."""
    grid = Table(box=None, pad_edge=False, padding=(0, GAP, 0, 0), show_edge=False)
    for header in headers:
        grid.add_column(header.upper(), no_wrap=True, header_style="bold")
    for row in rows:
        grid.add_row(*(_styled(cell(v)) for v in row))
    target = console(out)
    with target.capture() as captured:
        target.print(grid)
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
) -> None:
    """``document`` as JSON or YAML, else the table (or ``empty`` when it has no rows)."""
    if fmt == "json":
        print_json(document)
    elif fmt == "yaml":
        print_yaml(document)
    elif not rows and empty:
        print(empty)
    else:
        table(headers, rows)


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")


def info(message: str) -> None:
    """A progress or status line for people, on stderr so stdout stays the answer."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
