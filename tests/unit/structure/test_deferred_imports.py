"""Storage imports at the top of its modules (the memory service's storage, the agent's A2A
task stores); the few imports deferred into a function are the ones that must be, each for
a reason named here.

import-linter sees every import wherever it is written; this checks *where*, since a
deferred import hides a dependency from a reader of the module's head.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kaos_agent.a2a
import kaos_memory.storage

STORAGE = Path(kaos_memory.storage.__file__).parent
A2A = Path(kaos_agent.a2a.__file__).parent

DEFERRED = {
    # The backend of the configured mode only: each brings its own driver (Chroma, or
    # psycopg with pgvector), and a store of one mode never loads the other's.
    ("mem0/backend.py", "vector_backend", "kaos_memory.storage.mem0.chroma.backend"),
    ("mem0/backend.py", "vector_backend", "kaos_memory.storage.mem0.pgvector.backend"),
    # Mem0 reads MEM0_DIR and MEM0_TELEMETRY when first imported: only a started store,
    # after the service has set them, may import it.
    ("mem0/config.py", "build_memory", "mem0"),
    ("mem0/history.py", "null_history", "mem0.memory.storage"),
    ("mem0/llm.py", "_mem0_utils", "mem0.memory.utils"),
    ("mem0/llm.py", "_mem0_extraction_prompt", "mem0.configs.prompts"),
}

A2A_DEFERRED = {
    # psycopg and its pool only in an agent whose task store is PostgreSQL (the agent's
    # idle memory is a tracked figure).
    ("stores.py", "build_task_store", "kaos_agent.a2a.pg_store"),
}


def deferred_imports(root: Path = STORAGE) -> set[tuple[str, str, str]]:
    found: set[tuple[str, str, str]] = set()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for func in ast.walk(tree):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom) and node.module:
                    module = node.module
                elif isinstance(node, ast.Import):
                    module = node.names[0].name
                else:
                    continue
                found.add((path.relative_to(root).as_posix(), func.name, module))
    return found


def test_only_the_named_imports_are_deferred() -> None:
    assert deferred_imports() == DEFERRED


def test_only_the_named_task_store_imports_are_deferred() -> None:
    assert deferred_imports(A2A) == A2A_DEFERRED
