"""Mem0's history database: switched off in external mode, purged after every erasure.

Mem0 records every add, update and delete (with the fact text) and the raw turns it
extracted from in a SQLite file beside the process. Mem0 keeps a deleted fact's text in
the ``history`` rows (one per add and per delete, with the old text), and the raw turns
in the ``messages`` rows (per session scope: ``Memory.add`` reads the last ten of the
session scope into every extraction prompt as "last messages" and saves the new turns
after the model answered). An erasure has to reach both (``purge_mem0_history``).

In external mode that file would be node-local state on an ephemeral disk: each replica
would hold a different part of it, extraction context would differ by which replica
served a fold, and an erasure on one replica could not reach another's copy. It is not
memory data (the vector store and the relational tiers are), so external mode keeps none
of it (``null_history``).
"""

from __future__ import annotations

from typing import Any

from kaos_memory.storage.mem0.terms import ID_KEYS, WILDCARD, Filters

_CHUNK = 500


def null_history() -> Any:
    """A Mem0 ``SQLiteManager`` (in memory) that records nothing and remembers nothing."""
    # Not at the top: Mem0 reads its environment (telemetry, ``MEM0_DIR``) when first
    # imported, which the long-term store sets at its start.
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


def parse_session_scope(scope: str) -> dict[str, str]:
    """Mem0's ``messages.session_scope`` (``agent_id=..&run_id=..&user_id=..``) as a dict."""
    out: dict[str, str] = {}
    for part in scope.split("&"):
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value.replace("%3D", "=").replace("%26", "&").replace("%25", "%")
    return out


def purge_mem0_history(
    conn: Any,
    ids: list[str],
    scope_filter: Filters | None,
    run_ids: list[str] | None = None,
) -> None:
    """Delete the history rows of ``ids`` and, given a scope filter, the scope's messages,
    and the messages of every session scope whose ``run_id`` is in ``run_ids``.

    ``conn`` is Mem0's own history connection (the caller holds Mem0's lock); the filter's
    identity keys select messages, a wildcard or absent key matches everything.
    """
    runs = set(run_ids or ())
    try:
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ",".join("?" for _ in chunk)
            conn.execute(f"DELETE FROM history WHERE memory_id IN ({marks})", chunk)
        if scope_filter is not None or runs:
            wanted = None
            if scope_filter is not None:
                wanted = {k: v for k, v in scope_filter.items() if k in ID_KEYS and v != WILDCARD}
            doomed = []
            for rid, session_scope in conn.execute("SELECT id, session_scope FROM messages"):
                parsed = parse_session_scope(session_scope or "")
                in_scope = wanted is not None and all(parsed.get(k) == v for k, v in wanted.items())
                if in_scope or parsed.get("run_id") in runs:
                    doomed.append((rid,))
            conn.executemany("DELETE FROM messages WHERE id = ?", doomed)
    except BaseException:
        conn.rollback()
        raise
    conn.commit()
