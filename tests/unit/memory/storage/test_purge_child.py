"""Purges of Chroma's SQLite file run in a child process (``chroma.files.in_child``): what they
remove, what they keep, and what a failure becomes.

Chroma's Rust extension links its own SQLite; a second copy in the same process (Python's
``sqlite3``) would not see its locks, so the service never opens that file itself. These
tests use a file shaped like Chroma's write-ahead log table.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from kaos_memory.storage.mem0.chroma.files import in_child


def chroma_like(path: Path) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE embeddings_queue (seq INTEGER PRIMARY KEY, id TEXT, operation INT)"
        )
        rows = [("a", 0), ("a", 1), ("a", 3), ("b", 0), ("c", 2)]
        conn.executemany("INSERT INTO embeddings_queue (id, operation) VALUES (?, ?)", rows)
    conn.close()


def queue(path: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT id, operation FROM embeddings_queue ORDER BY seq").fetchall()
    finally:
        conn.close()


def test_the_log_purge_drops_the_erased_ids_records_but_their_deletes(tmp_path: Path) -> None:
    db = tmp_path / "chroma.sqlite3"
    chroma_like(db)
    in_child("chroma-log", db, ["a", "c"])
    # "a"'s add and update are gone, its delete stays (a replay still deletes); "b" is kept.
    assert queue(db) == [("a", 3), ("b", 0)]


def test_vacuum_in_a_child_keeps_the_rows_and_empties_the_wal(tmp_path: Path) -> None:
    db = tmp_path / "chroma.sqlite3"
    chroma_like(db)
    in_child("vacuum", db)
    assert queue(db) == [("a", 0), ("a", 1), ("a", 3), ("b", 0), ("c", 2)]
    wal = db.with_name(db.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0


def test_a_failing_child_is_a_temporary_storage_error(tmp_path: Path) -> None:
    not_a_database = tmp_path / "chroma.sqlite3"
    not_a_database.write_bytes(b"this is not a database file" * 100)
    with pytest.raises(sqlite3.OperationalError, match=r"chroma-log of chroma\.sqlite3 failed"):
        in_child("chroma-log", not_a_database, ["a"])
    # Nothing was written to it.
    assert not_a_database.read_bytes() == b"this is not a database file" * 100


def test_no_ids_starts_no_child(tmp_path: Path) -> None:
    missing = tmp_path / "absent" / "chroma.sqlite3"
    in_child("chroma-log", missing, [])
    assert not missing.parent.exists()
