"""Purges of erased text from the places Mem0 and Chroma keep it after a deletion.

Mem0 deletes a fact from the vector store but keeps its text in its history database
(``history``: one row per add and per delete, with the old text) and keeps the raw turns
it extracted from (``messages``, per session scope). Chroma keeps every record's full
metadata, so the fact text, in its write-ahead log (``embeddings_queue``) until a much
later compaction. Erasure has to reach all three. And SQLite leaves deleted rows in free
pages until they are reused: ``vacuum_sqlite`` rewrites a file another library writes.

Chroma's own file (``chroma.sqlite3``) is only ever opened in a child process
(``in_child``): Chroma's Rust extension links its own copy of SQLite, and two copies in
one process do not see each other's POSIX locks, while closing any descriptor of the
file drops every lock the process holds on it (sqlite.org, "How To Corrupt An SQLite
Database File", 2.2.1); a Python connection working beside Chroma's writers in one
process corrupted the file in a trial. Between processes the locks hold.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

# Seconds a child purge may take (a VACUUM rewrites the whole file).
CHILD_TIMEOUT = 600.0

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


def purge_mem0_history(
    conn: Any,
    ids: list[str],
    scope_filter: dict[str, str] | None,
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
                wanted = {k: v for k, v in scope_filter.items() if k in _ID_KEYS and v != "*"}
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


def vacuum_sqlite(path: Path) -> None:
    """Rewrite a SQLite file another library writes (Chroma), so the pages its deletions
    freed, which still hold the deleted text, are gone; then empty its WAL.

    ``secure_delete`` would only cover deletions made on this connection, and Chroma
    deletes on its own; ``VACUUM`` copies the live rows into fresh pages and the
    checkpoint with ``TRUNCATE`` drops the WAL frames that held the old ones.
    """
    if not path.exists():
        return
    conn = sqlite3.connect(path, timeout=30, isolation_level=None)
    try:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def in_child(operation: str, path: Path, ids: list[str] | None = None) -> None:
    """Run ``purge_chroma_log`` (``operation`` "chroma-log") or ``vacuum_sqlite``
    ("vacuum") on ``path`` in a child process; ``sqlite3.OperationalError`` when it fails
    (the caller's erasure is then retried, as for any temporary storage failure)."""
    if operation == "chroma-log" and not ids:
        return
    argv = [sys.executable, "-m", "kaos_memory.storage.purge", operation, str(path)]
    try:
        done = subprocess.run(
            argv,
            input=json.dumps(ids or []).encode(),
            capture_output=True,
            timeout=CHILD_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise sqlite3.OperationalError(f"{operation} of {path.name} did not finish") from exc
    if done.returncode != 0:
        # The child's stderr names the SQLite error; it goes to the log, not to a client.
        detail = done.stderr.decode(errors="replace")[-2000:]
        raise sqlite3.OperationalError(f"{operation} of {path.name} failed: {detail}")


def _main(args: list[str]) -> int:
    operation, path = args[0], Path(args[1])
    if operation == "chroma-log":
        ids = json.loads(sys.stdin.buffer.read() or b"[]")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            print("ids: a JSON list of strings on stdin", file=sys.stderr)
            return 2
        purge_chroma_log(path, ids)
    elif operation == "vacuum":
        vacuum_sqlite(path)
    else:
        print(f"unknown operation {operation!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
