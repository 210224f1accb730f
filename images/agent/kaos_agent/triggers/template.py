"""A trigger's message: its template with each placeholder replaced by a payload value.

The only syntax is ``{{ path.to.field }}``: a dotted path of object keys and list indexes
(``{{ commits.0.message }}``), spaces inside the braces optional. Nothing is evaluated
(not Jinja, not ``str.format``): anything else in the template, a ``{{`` that is not a
placeholder included, is copied as written. A placeholder becomes the value at its path: a
string as it is, any other JSON value as compact JSON, a missing one (or a path through a
value that has no such key or index) the empty string. Replacement is one pass over the
template, so a value that looks like a placeholder is never expanded in turn.

Sizes are capped, so a hostile payload makes a long message at worst: each value at
``MAX_VALUE_CHARS`` (serialised only that far, however large or deep the value), the
message at ``MAX_MESSAGE_CHARS``; a cut is marked with ``TRUNCATED``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

# A key is any run of characters but spaces, dots and braces; a path at most 32 of them.
PLACEHOLDER = re.compile(r"\{\{[ \t]*([^\s.{}]+(?:\.[^\s.{}]+){0,31})[ \t]*\}\}")
MAX_VALUE_CHARS = 4_000
MAX_MESSAGE_CHARS = 32_000
TRUNCATED = "…"
# Deeper than this, a value is written as ``TRUNCATED`` (JSON bodies are shallower: the
# edge refuses nesting deeper than 32).
MAX_DEPTH = 64
_INDEX = re.compile(r"0|[1-9][0-9]{0,8}")


def render(template: str, payload: object) -> str:
    """``template`` with every placeholder replaced by its value in ``payload``."""
    message = PLACEHOLDER.sub(lambda match: value_text(lookup(payload, match.group(1))), template)
    return _cut(message, MAX_MESSAGE_CHARS)


_MISSING = object()


def lookup(payload: object, path: str) -> object:
    """The value at the dotted ``path`` of ``payload``; ``_MISSING`` when there is none."""
    value = payload
    for key in path.split("."):
        if isinstance(value, dict):
            value = value.get(key, _MISSING)
        elif isinstance(value, list) and _INDEX.fullmatch(key) and int(key) < len(value):
            value = value[int(key)]
        else:
            return _MISSING
    return value


def value_text(value: object) -> str:
    """A value as its placeholder's text, at most ``MAX_VALUE_CHARS`` (and the mark)."""
    if value is _MISSING:
        return ""
    if isinstance(value, str):
        return _cut(value, MAX_VALUE_CHARS)
    text: list[str] = []
    size = 0
    for piece in _compact(value, 0):
        text.append(piece)
        size += len(piece)
        if size > MAX_VALUE_CHARS:
            break  # the rest is never serialised
    return _cut("".join(text), MAX_VALUE_CHARS)


def _compact(value: object, depth: int) -> Iterator[str]:
    """Compact JSON of ``value``, piece by piece (so a huge value is cut early)."""
    if depth > MAX_DEPTH:
        yield json.dumps(TRUNCATED, ensure_ascii=False)
    elif isinstance(value, dict):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield ("," if i else "") + json.dumps(str(key), ensure_ascii=False) + ":"
            yield from _compact(item, depth + 1)
        yield "}"
    elif isinstance(value, list):
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ","
            yield from _compact(item, depth + 1)
        yield "]"
    else:
        # A scalar: a string (cut first, as it may be huge), number, boolean or null.
        if isinstance(value, str):
            value = _cut(value, MAX_VALUE_CHARS)
        yield json.dumps(value, ensure_ascii=False)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + TRUNCATED
