"""Tombstones in the conversation store, on both backends: what a pending erasure fences.

Driven through ``SqlConversationStore`` directly with a ``FakeClock``: the erasure is
recorded with the deletes, keeps fold work of its sessions off every query a replica uses
to start work (the tombstone check), and is resumed by another owner when its holder's
lease lapses.
"""

from __future__ import annotations

from kaos_memory.scope import Attribution, Scope
from kaos_memory.storage.base import ErasureSelector, FoldPolicy, NewTurn
from kaos_memory.storage.sql.store import SqlConversationStore

from tests.support.clock import FakeClock

POLICY = FoldPolicy(trigger_tokens=30, target_tokens=10, max_events=100)
NO_FOLD = FoldPolicy(trigger_tokens=10_000, target_tokens=10, max_events=10_000)
WHO = Attribution(group="g", session="s1", principal="alice", agent="kaos://agent/a/b")
OTHER = Attribution(group="g", session="s2", principal="bob", agent=None)
SESSION = Scope(level="session", group="g", session="s1", principal="alice", agent=None)


async def write(store: SqlConversationStore, n: int, who: Attribution = WHO) -> None:
    turns = [NewTurn("user", f"turn {i}", 10) for i in range(n)]
    await store.append(who, turns, True, NO_FOLD)


async def test_a_pending_erasure_fences_every_start_of_fold_work(
    store: SqlConversationStore,
) -> None:
    await write(store, 5)
    await write(store, 5, OTHER)
    assert await store.claim_fold(OTHER.key, OTHER.session, POLICY) is not None
    erased = await store.erase(ErasureSelector(group="g", key=WHO.key), SESSION, "e", 60)
    tombstone = erased.tombstone
    assert tombstone is not None
    assert erased.turns == 5
    assert tombstone.keys == (WHO.key,) and tombstone.sessions == ("s1",)

    # Written after the forget: new data, but it waits until the erasure is final.
    await write(store, 5)
    fold = await store.claim_fold(WHO.key, WHO.session, POLICY)
    assert fold is not None
    assert await store.next_extraction(WHO.key) is None
    assert await store.pending_digest_folds(WHO.key) == []
    assert [p.key for p in await store.outbox(10)] == [OTHER.key]
    assert await store.acquire_lease(WHO.key, "extract", "w", 60)
    assert await store.begin_extraction(fold, "w") is None
    assert await store.add_digest(WHO.key, "summary", [fold.id], 10) is None
    await store.release_lease(WHO.key, "extract", "w")

    assert await store.finish_erasure(tombstone, "e")
    assert await store.pending_erasures(10) == []
    assert (await store.next_extraction(WHO.key)) is not None
    assert {p.key for p in await store.outbox(10)} == {WHO.key, OTHER.key}
    assert await store.acquire_lease(WHO.key, "extract", "w", 60)
    assert await store.begin_extraction(fold, "w") == 1
    # The bystander's session never was fenced.
    assert await store.next_extraction(OTHER.key) is not None


async def test_live_leases_count_the_work_in_flight_until_it_ends_or_lapses(
    store: SqlConversationStore, clock: FakeClock
) -> None:
    await write(store, 5)
    assert await store.acquire_lease(WHO.key, "extract", "a", 10)
    assert await store.acquire_lease(WHO.key, "digest", "b", 30)
    assert await store.live_leases([WHO.key, OTHER.key]) == 2
    await store.release_lease(WHO.key, "digest", "b")
    assert await store.live_leases([WHO.key]) == 1
    clock.advance(11)  # the holder died: its lease lapses
    assert await store.live_leases([WHO.key]) == 0


async def test_an_erasure_whose_holder_died_is_taken_over(
    store: SqlConversationStore, clock: FakeClock
) -> None:
    await write(store, 3)
    user = Scope(level="user", group="g", session=None, principal="alice", agent=None)
    erased = await store.erase(ErasureSelector(group="g", principal="alice"), user, "dead", 10)
    assert erased.tombstone is not None
    assert await store.pending_erasures(10) == [], "its holder's lease is live"
    clock.advance(11)
    (pending,) = await store.pending_erasures(10)
    assert pending.id == erased.tombstone.id
    assert (pending.level, pending.principal, pending.keys) == ("user", "alice", (WHO.key,))
    assert pending.sessions == ("s1",)
    assert await store.acquire_lease(pending.lease_key, "erase", "heir", 10)
    assert await store.pending_erasures(10) == []
    assert not await store.finish_erasure(pending, "dead"), "the old holder is fenced off"
    assert await store.finish_erasure(pending, "heir")
    clock.advance(100)
    assert await store.pending_erasures(10) == []


async def test_an_erasure_that_reaches_no_session_is_still_recorded(
    store: SqlConversationStore,
) -> None:
    erased = await store.erase(None, SESSION, "e", 60)
    assert erased.tombstone is not None and erased.tombstone.keys == ()
    assert await store.live_leases([]) == 0
    assert await store.finish_erasure(erased.tombstone, "e")
