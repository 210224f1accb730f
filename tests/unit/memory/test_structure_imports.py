"""Storage depends only downward: no module under ``kaos_memory/storage/`` imports upward.

``scope`` keeps the domain rules; storage may use its two public value types (``Scope``,
``Attribution``) and nothing else of it (the Mem0 adapter alone turns a scope into Mem0
filters and metadata). Storage never imports the fold arithmetic (``compaction``: the fold
decision arrives in ``append`` as data) nor any module that composes the service.
Checked on the source with ``ast``, so a lazy import inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kaos_memory

PACKAGE = Path(kaos_memory.__file__).parent
STORAGE = PACKAGE / "storage"

# The public value types of ``scope`` that cross into storage.
SCOPE_PUBLIC = {"Scope", "Attribution"}
# What storage may import from the rest of the service package.
ALLOWED = {"kaos_memory.clock", "kaos_memory.settings", "kaos_memory.scope"}
# Scope internals a storage module may still import (none: the Mem0 adapter owns the
# scope-to-filter translation).
PENDING: dict[str, set[str]] = {}


def _imports(path: Path) -> list[tuple[str, set[str]]]:
    """``(module, names)`` of every ``kaos_memory`` import in ``path`` (names empty for a
    plain ``import module``)."""
    found: list[tuple[str, set[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, {a.name for a in node.names}))
        elif isinstance(node, ast.Import):
            found += [(a.name, set()) for a in node.names]
    return [(m, n) for m, n in found if m == "kaos_memory" or m.startswith("kaos_memory.")]


def _storage_modules() -> list[Path]:
    return sorted(STORAGE.rglob("*.py"))


def test_there_are_storage_modules_to_check() -> None:
    names = {p.relative_to(STORAGE).as_posix() for p in _storage_modules()}
    assert {"base.py", "sql/store.py", "sql/window.py", "longterm.py"} <= names


def test_storage_imports_nothing_above_it() -> None:
    problems: list[str] = []
    for path in _storage_modules():
        rel = path.relative_to(STORAGE).as_posix()
        for module, names in _imports(path):
            if module.startswith("kaos_memory.storage"):
                continue
            if module not in ALLOWED:
                problems.append(f"{rel} imports {module}")
            elif module == "kaos_memory.scope":
                internal = names - SCOPE_PUBLIC - PENDING.get(rel, set())
                if internal or not names:
                    problems.append(f"{rel} imports scope internals {sorted(internal)}")
    assert not problems, "\n".join(problems)


def test_the_service_decodes_no_long_term_cursor_itself() -> None:
    # The cursor codec belongs to the long-term store's interface; the service asks it.
    imported = {m for m, _ in _imports(PACKAGE / "service.py")}
    assert "kaos_memory.storage.longterm" not in imported
