"""Mem0's history database, switched off for external mode.

Mem0 records every add, update and delete (with the fact text) and the raw turns it
extracted from in a SQLite file beside the process. In external mode that file would be
node-local state on an ephemeral disk: each replica would hold a different part of it,
extraction context ("last messages") would differ by which replica served a fold, and an
erasure on one replica could not reach another's copy. It is not memory data (the vector
store and the relational tiers are), so external mode keeps none of it.
"""

from __future__ import annotations

from typing import Any


def null_history() -> Any:
    """A Mem0 ``SQLiteManager`` (in memory) that records nothing and remembers nothing."""
    from mem0.memory.storage import SQLiteManager

    class NullHistory(SQLiteManager):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(":memory:")

        def add_history(self, *args: Any, **kwargs: Any) -> None:
            return None

        def batch_add_history(self, records: list[dict[str, Any]]) -> None:
            return None

        def save_messages(self, messages: list[dict[str, Any]], session_scope: str) -> None:
            return None

        def get_last_messages(self, session_scope: str, limit: int = 10) -> list[dict[str, Any]]:
            return []

    return NullHistory()
