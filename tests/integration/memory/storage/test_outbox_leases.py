"""The conversational store's outbox, leases and idle-session queries, on both backends.

Driven through ``SqlConversationStore`` directly (SQLite file / a fresh PostgreSQL
database): the rules several replicas rely on, checked one by one. The store reads a
``FakeClock``: expiry and back-off are exercised by moving it forward, so no test waits.
"""

from __future__ import annotations

from kaos_memory.clock import iso
from kaos_memory.scope import Attribution, Scope
from kaos_memory.storage.base import ErasureSelector, FoldPolicy, NewTurn
from kaos_memory.storage.sql.store import SqlConversationStore

from tests.support.clock import FakeClock
from tests.support.storage import window_rows

POLICY = FoldPolicy(trigger_tokens=30, target_tokens=10, max_events=100)
# Writes that never fold on their own, so a test claims folds when it wants them.
NO_FOLD = FoldPolicy(trigger_tokens=10_000, target_tokens=10, max_events=10_000)
WHO = Attribution(group="g", session="s1", principal="alice", agent="kaos://agent/a/b")


async def write(store: SqlConversationStore, n: int, who: Attribution = WHO) -> None:
    turns = [NewTurn("user", f"turn {i}", 10) for i in range(n)]
    await store.append(who, turns, True, NO_FOLD)


async def test_the_write_that_crosses_the_trigger_records_the_fold(
    store: SqlConversationStore,
) -> None:
    turns = [NewTurn("user", f"turn {i}", 10) for i in range(3)]
    first = await store.append(WHO, turns, True, POLICY)
    assert first.fold_id is None and first.stats.tokens == 30
    second = await store.append(WHO, turns[:1], True, POLICY)
    assert second.fold_id is not None, "40 tokens > 30: this write evicts"
    assert second.stats.tokens == 40, "the stats are the window the write saw"
    assert [r.content for r in await window_rows(store, WHO.key, 10)] == ["turn 0"]
    assert await store.outbox_depth() == 1
    fold = await store.next_extraction(WHO.key)
    assert fold is not None and fold.id == second.fold_id
    assert [t.content for t in fold.turns] == ["turn 0", "turn 1", "turn 2"]


async def test_a_lease_has_one_holder_until_it_lapses(
    store: SqlConversationStore, clock: FakeClock
) -> None:
    assert await store.acquire_lease("k", "extract", "a", 60)
    assert not await store.acquire_lease("k", "extract", "b", 60)
    assert await store.acquire_lease("k", "digest", "b", 60), "kinds are independent"
    assert await store.acquire_lease("k", "extract", "a", 60), "the holder may re-acquire"
    assert await store.renew_lease("k", "extract", "a", 60)
    assert not await store.renew_lease("k", "extract", "b", 60)

    assert await store.acquire_lease("k2", "extract", "a", 10)
    clock.advance(10)
    assert not await store.acquire_lease("k2", "extract", "b", 60), "held to its expiry"
    clock.advance(0.001)
    assert await store.acquire_lease("k2", "extract", "b", 60), "a lapsed lease is taken over"
    assert not await store.renew_lease("k2", "extract", "a", 60), "the old holder lost it"

    await store.release_lease("k", "extract", "b")  # not b's: nothing happens
    assert not await store.acquire_lease("k", "extract", "b", 60)
    await store.release_lease("k", "extract", "a")
    assert await store.acquire_lease("k", "extract", "b", 60)


async def test_extraction_is_fenced_by_the_lease(
    store: SqlConversationStore, clock: FakeClock
) -> None:
    await write(store, 5)
    fold = await store.claim_fold(WHO.key, WHO.session, POLICY)
    assert fold is not None and len(fold.turns) == 4
    assert (await store.next_extraction(WHO.key)) == fold

    assert await store.begin_extraction(fold, "a") is None, "no lease, no attempt"
    assert await store.acquire_lease(WHO.key, "extract", "a", 60)
    assert await store.begin_extraction(fold, "a") == 1
    # a stalls past its lease; b takes the session over and redoes the fold.
    clock.advance(61)
    assert await store.acquire_lease(WHO.key, "extract", "b", 60)
    assert await store.finish_extraction(fold, "a", "done") == "lost"
    assert await store.begin_extraction(fold, "b") == 2
    assert await store.finish_extraction(fold, "b", "done") == "done"
    assert await store.next_extraction(WHO.key) is None
    assert await store.begin_extraction(fold, "b") is None, "a done fold is not redone"
    assert await store.finish_extraction(fold, "b", "done") == "lost"


async def test_erasure_voids_the_outbox_and_keeps_the_leases(store: SqlConversationStore) -> None:
    await write(store, 5)
    fold = await store.claim_fold(WHO.key, WHO.session, POLICY)
    assert fold is not None
    assert await store.acquire_lease(WHO.key, "extract", "a", 60)
    assert await store.begin_extraction(fold, "a") == 1
    scope = Scope(level="session", group="g", session=WHO.session, principal=None, agent=None)
    await store.erase(ErasureSelector(group="g", key=WHO.key), scope, "e", 60)
    assert await store.finish_extraction(fold, "a", "done") == "gone"
    assert await store.outbox_depth() == 0
    # The lease of the work in flight stays: it is how the erasure sees that work end.
    assert await store.live_leases([WHO.key]) == 1
    assert not await store.acquire_lease(WHO.key, "extract", "b", 60)


async def test_outbox_lists_pending_sessions_nobody_holds(
    store: SqlConversationStore, clock: FakeClock
) -> None:
    other = Attribution(group="g", session="s2", principal="bob", agent=None)
    await write(store, 5)
    await write(store, 5, other)
    assert await store.claim_fold(WHO.key, WHO.session, POLICY) is not None
    assert await store.claim_fold(other.key, other.session, POLICY) is not None
    assert await store.outbox_depth() == 2
    assert {p.key for p in await store.outbox(10)} == {WHO.key, other.key}
    assert [p.session for p in await store.outbox(1)] == ["s1"], "oldest work first"

    assert await store.acquire_lease(WHO.key, "digest", "a", 60)
    assert {p.key for p in await store.outbox(10)} == {other.key}, "held sessions are skipped"
    clock.advance(61)  # its holder died: the lease lapses
    assert {p.key for p in await store.outbox(10)} == {WHO.key, other.key}

    # Failing work backs off: not listed again before its retry time, which doubles.
    fold = await store.next_extraction(other.key)
    assert fold is not None
    assert await store.defer([fold.id], base=600, cap=900) == 600
    assert {p.key for p in await store.outbox(10)} == {WHO.key}
    assert await store.defer([fold.id], base=600, cap=900) == 900, "doubled, then capped"
    clock.advance(899)
    assert {p.key for p in await store.outbox(10)} == {WHO.key}, "not due before its time"
    clock.advance(1)
    assert {p.key for p in await store.outbox(10)} == {WHO.key, other.key}, "due again"
    assert await store.defer([123456], base=1, cap=2) == 0, "an erased fold is skipped"


async def test_idle_sessions_and_their_flush(store: SqlConversationStore, clock: FakeClock) -> None:
    await write(store, 2)  # below the trigger: nothing folds on its own
    assert await store.claim_fold(WHO.key, WHO.session, POLICY) is None
    assert await store.idle_sessions(iso(clock() - 1), 10) == [], "written after the cutoff"
    [idle] = await store.idle_sessions(iso(clock()), 10)
    assert (idle.key, idle.session) == (WHO.key, WHO.session)

    # A write after the sweep saw it idle: the flush does nothing.
    clock.advance(1)
    await write(store, 1)
    assert await store.flush_session(WHO.key, WHO.session, idle.last_at) is None
    [idle] = await store.idle_sessions(iso(clock()), 10)
    fold = await store.flush_session(WHO.key, WHO.session, idle.last_at)
    assert fold is not None and len(fold.turns) == 3, "the whole window is folded"
    assert await window_rows(store, WHO.key, 10) == []
    assert await store.idle_sessions(iso(clock()), 10) == [], "flushed until the next write"
    await write(store, 1)
    assert [i.key for i in await store.idle_sessions(iso(clock()), 10)] == [WHO.key]


async def test_local_restart_voids_leftover_leases(store: SqlConversationStore) -> None:
    assert await store.acquire_lease("k", "extract", "dead-process", 3600)
    assert await store.release_all_leases() == 1
    assert await store.acquire_lease("k", "extract", "new-process", 60)


async def test_a_recalls_session_read_is_the_window_and_digest_its_principal_may_see(
    store: SqlConversationStore,
) -> None:
    await write(store, 5)
    fold = await store.claim_fold(WHO.key, WHO.session, FoldPolicy(30, 10, 100))
    assert fold is not None
    assert await store.add_digest(WHO.key, "alice plans a trip", [fold.id], 3) is not None
    read = await store.read_session(WHO.key, "alice", 10, turns=True, digest=True)
    # The unfolded turns, newest first, and the latest digest: in one round of the store.
    unfolded = [r.content for r in await window_rows(store, WHO.key, 10)]
    assert [t.content for t in read.turns] == unfolded and unfolded[0] == "turn 4"
    assert read.digest is not None and read.digest.summary == "alice plans a trip"
    # Each part alone, and none: the same rows.
    assert (await store.read_session(WHO.key, None, 2, turns=True, digest=False)).turns == (
        read.turns[:2]
    )
    alone = await store.read_session(WHO.key, "alice", 10, turns=False, digest=True)
    assert alone.turns == [] and alone.digest == read.digest
    assert await store.read_session(WHO.key, None, 10, turns=False, digest=False) == type(read)(
        turns=[], digest=None
    )
    # A principal who never wrote to the session reads nothing of it.
    bob = await store.read_session(WHO.key, "bob", 10, turns=True, digest=True)
    assert bob.turns == [] and bob.digest is None
    # The pooled connection a PostgreSQL read used is back out of autocommit: the next
    # transaction on it must still be one.
    pool = getattr(store._db, "_pool", None)
    if pool is not None:
        with pool.connection() as conn:
            assert conn.autocommit is False
