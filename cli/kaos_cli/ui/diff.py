"""Word-level difference between two digest versions, as escaped HTML (pure)."""

from __future__ import annotations

import difflib
import re
from html import escape

_TOKENS = re.compile(r"\s+|[^\s]+")


def diff_html(old: str, new: str) -> str:
    """``new`` with inserted words in ``<ins>`` and removed words of ``old`` in ``<del>``."""
    a, b = _TOKENS.findall(old), _TOKENS.findall(new)
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op in ("delete", "replace"):
            out.append(f"<del>{escape(''.join(a[i1:i2]))}</del>")
        if op in ("insert", "replace"):
            out.append(f"<ins>{escape(''.join(b[j1:j2]))}</ins>")
        if op == "equal":
            out.append(escape("".join(a[i1:i2])))
    return "".join(out)
