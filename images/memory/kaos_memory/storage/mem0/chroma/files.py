"""Purges of erased text from the SQLite files of local mode, which Chroma writes.

Chroma keeps every record's full metadata, so the fact text, in its write-ahead log
(``embeddings_queue``) until a much later compaction, long after the row was deleted:
``purge_chroma_log`` drops the deleted ids' add and update records (the delete records
stay, so a replay of the log after a restart still deletes). And SQLite leaves deleted
rows in free pages until they are reused: ``vacuum_sqlite`` rewrites a file another
library writes (Chroma's, and the listing index beside it).

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

# Seconds a child purge may take (a VACUUM rewrites the whole file).
CHILD_TIMEOUT = 600.0

_CHUNK = 500


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
    argv = [sys.executable, "-m", "kaos_memory.storage.mem0.chroma.files", operation, str(path)]
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
