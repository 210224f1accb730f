"""Purges of erased text from the places Mem0 and Chroma keep it after a deletion.

Mem0 deletes a fact from the vector store but keeps its text in its history database
(``history``: one row per add and per delete, with the old text) and keeps the raw turns
it extracted from (``messages``, per session scope). Chroma keeps every record's full
metadata, so the fact text, in its write-ahead log (``embeddings_queue``) until a much
later compaction. Erasure has to reach all three.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

_ID_KEYS = ("user_id", "agent_id", "run_id")
_CHUNK = 500


def parse_session_scope(scope: str) -> dict[str, str]:
    """Mem0's ``messages.session_scope`` (``agent_id=..&run_id=..&user_id=..``) as a dict."""
    out: dict[str, str] = {}
    for part in scope.split("&"):
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value.replace("%3D", "=").replace("%26", "&").replace("%25", "%")
    return out


def purge_mem0_history(conn: Any, ids: list[str], scope_filter: dict[str, str] | None) -> None:
    """Delete the history rows of ``ids`` and, given a scope filter, the scope's messages.

    ``conn`` is Mem0's own history connection (the caller holds Mem0's lock); the filter's
    identity keys select messages, a wildcard or absent key matches everything.
    """
    try:
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ",".join("?" for _ in chunk)
            conn.execute(f"DELETE FROM history WHERE memory_id IN ({marks})", chunk)
        if scope_filter is not None:
            wanted = {k: v for k, v in scope_filter.items() if k in _ID_KEYS and v != "*"}
            rows = conn.execute("SELECT id, session_scope FROM messages").fetchall()
            doomed = [
                (rid,)
                for rid, session_scope in rows
                if all(
                    parse_session_scope(session_scope or "").get(k) == v for k, v in wanted.items()
                )
            ]
            conn.executemany("DELETE FROM messages WHERE id = ?", doomed)
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def purge_chroma_log(path: Path, ids: list[str]) -> None:
    """Drop the erased ids' add/update records (which hold their text) from Chroma's WAL.

    The delete records stay, so a replay of the log after a restart still deletes.
    Chroma's operation codes: 0 add, 1 update, 2 upsert, 3 delete.
    """
    if not ids:
        return
    conn = sqlite3.connect(path, timeout=30)
    try:
        with conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                marks = ",".join("?" for _ in chunk)
                conn.execute(
                    f"DELETE FROM embeddings_queue WHERE operation <> 3 AND id IN ({marks})",
                    chunk,
                )
    finally:
        conn.close()
