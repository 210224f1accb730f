"""Plain-text tables and JSON for the CLI's answers.

Tables are for people (aligned columns, long text cut to the terminal's taste);
``--json`` prints the underlying document unchanged, for scripts.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

MAX_CELL = 60


def cell(value: object, width: int = MAX_CELL) -> str:
    """One table cell: ``-`` for nothing, newlines flattened, long text shortened."""
    if value is None or value == "":
        return "-"
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], out: TextIO | None = None
) -> None:
    """Print an aligned table, kubectl style (upper-case headers, two-space gaps)."""
    stream = out or sys.stdout
    cells = [[cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    lines = [[h.upper() for h in headers], *cells]
    for line in lines:
        stream.write("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
        stream.write("\n")


def print_json(document: Any, out: TextIO | None = None) -> None:
    (out or sys.stdout).write(json.dumps(document, indent=2, sort_keys=False) + "\n")


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
