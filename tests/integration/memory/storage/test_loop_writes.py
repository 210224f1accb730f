"""A window append on SQLite runs on the event loop while the write lock is free, takes the
store's thread when another connection holds it, and leaves the thread a checkpoint every
``CHECKPOINT_EVERY`` appends so the write-ahead log does not grow without end.
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
async def store(path: Path) -> AsyncIterator[SqlConversationStore]:
    s = SqlConversationStore(SqliteDialect(path))
    await s.start()
    try:
        yield s
    finally:
        await s.close()


async def test_an_append_does_not_wait_for_the_stores_thread(store: SqlConversationStore) -> None:
    release = threading.Event()
    # The store's one thread, busy with work that holds no lock (until released).
    busy = asyncio.ensure_future(store._hop(release.wait))
    try:
        # Bounded: on the thread this append would wait for ``release``, which never comes.
        assert await asyncio.wait_for(append(store, "s1"), 10) == 2
        assert await window(store, "s1") == ["hi", "hello from s1"]
        assert not busy.done()
    finally:
        release.set()
        await busy


async def test_an_append_waits_in_line_while_another_connection_writes(
    store: SqlConversationStore, path: Path
) -> None:
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        pending = asyncio.ensure_future(append(store, "s2"))
        # Let it start: it finds the lock held and goes to the thread, which waits for it.
        for _ in range(5):
            await asyncio.sleep(0)
        assert not pending.done()
        other.execute("COMMIT")
        assert await pending == 2
    finally:
        other.close()
    assert await window(store, "s2") == ["hi", "hello from s2"]


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
