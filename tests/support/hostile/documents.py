"""Paths into a JSON document, and a document's bytes with raw tokens put at a path."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

Path = tuple[str | int, ...]
# A path pattern: "*" matches any key or index.
Pattern = tuple[str | int, ...]

_SLOT = "@@kaos-fuzz-slot@@"
_SLOT_TOKEN = json.dumps(_SLOT).encode()


def walk(doc: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every node of a document with its path, the root first."""
    yield path, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from walk(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from walk(value, (*path, i))


def value_paths(doc: Any) -> list[Path]:
    return [p for p, _ in walk(doc)]


def string_paths(doc: Any) -> list[Path]:
    return [p for p, v in walk(doc) if isinstance(v, str)]


def object_paths(doc: Any) -> list[Path]:
    return [p for p, v in walk(doc) if isinstance(v, dict)]


def get_at(doc: Any, path: Path) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def set_at(doc: Any, path: Path, value: Any) -> Any:
    """A copy of ``doc`` with ``value`` at ``path`` (the root: ``value`` itself)."""
    if not path:
        return value
    out = copy.deepcopy(doc)
    get_at(out, path[:-1])[path[-1]] = value
    return out


def matches(path: Path, pattern: Pattern) -> bool:
    """``path`` lies in the subtree ``pattern`` names."""
    return len(path) >= len(pattern) and all(
        p == "*" or p == step for p, step in zip(pattern, path, strict=False)
    )


def dump(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def with_token(doc: Any, path: Path, token: bytes) -> bytes:
    """The document's bytes with the raw ``token`` (any bytes) as the value at ``path``."""
    rendered = dump(set_at(doc, path, _SLOT))
    assert rendered.count(_SLOT_TOKEN) == 1
    return rendered.replace(_SLOT_TOKEN, token)


def with_key_token(doc: Any, path: Path, key: str | None, token: bytes) -> bytes:
    """The document's bytes with the object at ``path`` holding an extra (or, with ``key``,
    a renamed) key whose raw bytes are ``token``."""
    obj = get_at(doc, path)
    assert isinstance(obj, dict)
    if key is None:
        new = {**obj, _SLOT: "x"}
    else:
        new = {(_SLOT if k == key else k): v for k, v in obj.items()}
    rendered = dump(set_at(doc, path, new))
    assert rendered.count(_SLOT_TOKEN) == 1
    return rendered.replace(_SLOT_TOKEN, token)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _where(path: Path) -> str:
    return (
        "body"
        if not path
        else "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    )
