"""SQLite dialect of the conversational tiers (local mode): one file beside embedded Chroma.

One connection used by one thread (the store's single executor thread), WAL journal so
readers in other processes (tests, operators' debugging) never block the writer, and
``BEGIN IMMEDIATE`` transactions: the single writer makes the per-key fold lock implicit.

A recall's read of one session runs on the event loop (``LoopReads``), on a second,
read-only connection: a few indexed rows read in less time than the hop to the writer's
thread and back, and under WAL a reader neither waits for the writer nor holds it up.

A window append runs on the event loop too (``LoopWrites``), on a third connection, when
the store's thread is idle and the write lock is free at that moment: its busy timeout is
zero, so it never waits for another process's transaction (the append then takes the
thread, in line), and it never checkpoints (a checkpoint may wait on the disk): the store
has the thread do that.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kaos_memory.storage.sql.dialect import ColumnTypes, Cursor, Statement, WriterBusy

TYPES = ColumnTypes(
    identity="INTEGER PRIMARY KEY AUTOINCREMENT",
    bigint="INTEGER",
    boolean="INTEGER",
    double="REAL",
    # SQLite before 3.43 has no octet_length; a text cast to a blob is its UTF-8 bytes.
    octets="length(CAST({} AS BLOB))",
)


# How long a read on the event loop may wait for a lock (the WAL index being rebuilt).
_LOOP_BUSY_MS = 200


def _read(conn: sqlite3.Connection, statements: Sequence[Statement]) -> list[list[Any]]:
    cur = conn.cursor()
    # A read transaction (deferred): one snapshot for every statement, no write lock.
    cur.execute("BEGIN")
    try:
        return [cur.execute(text, params).fetchall() for text, params in statements]
    finally:
        cur.execute("COMMIT")
        cur.close()


@contextmanager
def _immediate(conn: sqlite3.Connection, *, wait: bool) -> Iterator[Cursor]:
    """One ``BEGIN IMMEDIATE`` transaction (the database's one write lock); without
    ``wait`` (a connection whose busy timeout is zero), ``WriterBusy`` when another
    connection holds that lock."""
    cur = conn.cursor()
    try:
        cur.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        cur.close()
        # The primary code: SQLite may report an extended one (SQLITE_BUSY_RECOVERY, ...).
        if not wait and exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
            raise WriterBusy from None
        raise
    try:
        yield cur
    except BaseException:
        cur.execute("ROLLBACK")
        raise
    else:
        cur.execute("COMMIT")
    finally:
        cur.close()


def _configure(conn: sqlite3.Connection, *, busy_timeout_ms: int) -> None:
    """What every writing connection to the file sets."""
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
    # Deleted rows are overwritten with zeros, not left in free pages (erasure).
    conn.execute("PRAGMA secure_delete=ON")


class SqliteDialect:
    threads = 1
    types = TYPES

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._loop_conn: sqlite3.Connection | None = None
        self._loop_writer: sqlite3.Connection | None = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The connection moves to the store's one executor thread; only that thread uses it.
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        _configure(conn, busy_timeout_ms=5000)
        self._conn = conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    async def open_async(self) -> None:
        """The event loop's read-only connection (after ``open`` made the file)."""
        uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
        # A reader waits only while the WAL's index is rebuilt; never long on the loop.
        conn.execute(f"PRAGMA busy_timeout={_LOOP_BUSY_MS}")
        self._loop_conn = conn
        writer = sqlite3.connect(self.path, isolation_level=None)
        # Never wait for the write lock on the loop, never checkpoint there (see the module).
        _configure(writer, busy_timeout_ms=0)
        writer.execute("PRAGMA wal_autocheckpoint=0")
        self._loop_writer = writer

    async def close_async(self) -> None:
        for conn in (self._loop_conn, self._loop_writer):
            if conn is not None:
                conn.close()
        self._loop_conn = self._loop_writer = None

    async def read_async(self, statements: Sequence[Statement]) -> list[list[Any]]:
        """``read`` on the loop's connection: the statements see one snapshot."""
        if self._loop_conn is None:
            raise RuntimeError("sqlite store is not open")
        return _read(self._loop_conn, [(self.sql(t), p) for t, p in statements])

    def sql(self, text: str) -> str:
        return text.replace("%s", "?")

    def transaction(self) -> AbstractContextManager[Cursor]:
        if self._conn is None:
            raise RuntimeError("sqlite store is not open")
        return _immediate(self._conn, wait=True)

    def transaction_now(self) -> AbstractContextManager[Cursor]:
        if self._loop_writer is None:
            raise RuntimeError("sqlite store is not open")
        return _immediate(self._loop_writer, wait=False)

    def checkpoint(self) -> None:
        if self._conn is None:
            raise RuntimeError("sqlite store is not open")
        self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()

    def read(self, statements: Sequence[Statement]) -> list[list[Any]]:
        if self._conn is None:
            raise RuntimeError("sqlite store is not open")
        return _read(self._conn, [(self.sql(t), p) for t, p in statements])

    def lock_schema(self, cur: Cursor) -> None:
        # BEGIN IMMEDIATE already holds the database's one write lock.
        return None

    def lock_key(self, cur: Cursor, key: str) -> None:
        # BEGIN IMMEDIATE already holds the database's one write lock.
        return None

    def try_lock_key(self, cur: Cursor, key: str) -> bool:
        return True

    def reclaim(self) -> None:
        # secure_delete zeroed the deleted rows in the pages the erasure wrote to the WAL;
        # the checkpoint copies those pages over the old ones in the database file, and
        # TRUNCATE empties the WAL, whose older frames still held the rows' text.
        if self._conn is None:
            raise RuntimeError("sqlite store is not open")
        # A reader elsewhere (another connection's open snapshot) makes the checkpoint
        # give up after the busy timeout without an error: its first column says so, and
        # the WAL then still holds the old frames.
        busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise sqlite3.OperationalError("the WAL checkpoint was blocked by a reader")
