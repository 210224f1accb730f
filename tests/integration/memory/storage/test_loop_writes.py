"""A window append on SQLite runs on the event loop while the store's thread is idle and
the write lock free, goes to the thread in line behind work sent there before it, takes the
thread too when another connection holds the lock, and leaves the thread a checkpoint
every ``CHECKPOINT_EVERY`` appends so the write-ahead log does not grow without end.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kaos_memory.scope import Attribution
from kaos_memory.storage.base import FoldPolicy, NewTurn
from kaos_memory.storage.sql import loop_writer
from kaos_memory.storage.sql.sqlite import SqliteDialect
from kaos_memory.storage.sql.store import SqlConversationStore

NO_FOLD = FoldPolicy(trigger_tokens=10_000, target_tokens=10, max_events=10_000)
INSERT_TURN = "INSERT INTO kaos_mem_turns"


class WatchedDialect(SqliteDialect):
    """SQLite, noting the thread each turn insert ran on."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.insert_threads: list[int] = []

    def sql(self, text: str) -> str:
        if text.startswith(INSERT_TURN):
            self.insert_threads.append(threading.get_ident())
        return super().sql(text)


def said(session: str) -> Attribution:
    return Attribution(group="g", session=session, principal="user-a", agent="kaos://agent/t/a")


async def append(store: SqlConversationStore, session: str) -> int:
    turns = [NewTurn("user", f"hello from {session}", 5), NewTurn("assistant", "hi", 2)]
    appended = await store.append(said(session), turns, True, NO_FOLD)
    return appended.stats.events


async def window(store: SqlConversationStore, session: str) -> list[str]:
    read = await store.read_session(said(session).key, "user-a", 50, turns=True, digest=False)
    return [t.content for t in read.turns]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "conversation.sqlite3"


@pytest.fixture
def dialect(path: Path) -> WatchedDialect:
    return WatchedDialect(path)


@pytest.fixture
async def store(dialect: WatchedDialect) -> AsyncIterator[SqlConversationStore]:
    s = SqlConversationStore(dialect)
    await s.start()
    try:
        yield s
    finally:
        await s.close()


async def test_an_append_runs_on_the_loop_while_the_thread_is_idle(
    store: SqlConversationStore, dialect: WatchedDialect
) -> None:
    assert await append(store, "s1") == 2
    assert dialect.insert_threads == [threading.get_ident()] * 2
    assert await window(store, "s1") == ["hi", "hello from s1"]


async def test_an_append_waits_in_line_behind_the_threads_work(
    store: SqlConversationStore, dialect: WatchedDialect
) -> None:
    release = threading.Event()
    # Work sent to the store's thread first (a forget, a fold), still running.
    earlier = asyncio.ensure_future(store._hop(release.wait))
    try:
        pending = asyncio.ensure_future(append(store, "s2"))
        for _ in range(5):
            await asyncio.sleep(0)  # let the append be sent where it goes
        assert not pending.done() and dialect.insert_threads == []
    finally:
        release.set()
        await earlier
    assert await pending == 2
    loop_thread = threading.get_ident()
    assert len(dialect.insert_threads) == 2 and loop_thread not in dialect.insert_threads
    assert await window(store, "s2") == ["hi", "hello from s2"]


async def test_an_append_takes_the_thread_while_another_connection_writes(
    store: SqlConversationStore, dialect: WatchedDialect, path: Path
) -> None:
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        pending = asyncio.ensure_future(append(store, "s3"))
        # Let it start: it finds the lock held and goes to the thread, which waits for it.
        for _ in range(5):
            await asyncio.sleep(0)
        assert not pending.done()
        other.execute("COMMIT")
        assert await pending == 2
    finally:
        other.close()
    assert threading.get_ident() not in dialect.insert_threads
    assert await window(store, "s3") == ["hi", "hello from s3"]


async def test_the_thread_checkpoints_what_the_loop_wrote(
    store: SqlConversationStore, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop_writer, "CHECKPOINT_EVERY", 20)
    writer = store._loop_writer
    assert writer is not None
    wal = path.with_name(path.name + "-wal")
    sizes = []
    for rounds in range(4):
        for i in range(20):
            await append(store, f"r{rounds}-{i}")
        await writer.settled()
        sizes.append(wal.stat().st_size)
    # After a checkpoint the next append starts the log over, in the same file: it stays
    # at one round's size (it would add a round's pages every round without checkpoints).
    assert sizes[3] <= sizes[1] and sizes[2] <= sizes[1], sizes
    probe = sqlite3.connect(path, isolation_level=None)
    try:
        count = probe.execute("SELECT COUNT(*) FROM kaos_mem_turns").fetchone()[0]
    finally:
        probe.close()
    assert count == 4 * 20 * 2
