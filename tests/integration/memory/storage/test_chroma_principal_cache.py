"""A principal's facts held in the service in local mode (``storage.mem0.chroma.cache``),
on a real Mem0 ``Memory`` over a real embedded Chroma: a held search answers exactly what
Chroma's own search answers, a write is seen by the very next search, an erased fact never
comes back, a load that met a change is thrown away, and the budget is kept.

The oracle is the Chroma backend's query (``ChromaBackend.query``: Chroma's search by the
scope's indexed ids), which is what every local recall used before."""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kaos_memory.scope import Attribution, Scope
from kaos_memory.settings import MemorySettings
from kaos_memory.storage.base import FoldTag, TurnRow
from kaos_memory.storage.mem0.chroma import cache as chromaheld
from kaos_memory.storage.mem0.chroma import facts as chromafacts
from kaos_memory.storage.mem0.chroma.cache import ChromaPrincipalCache, principal_key
from kaos_memory.storage.mem0.store import Mem0LongTermStore
from kaos_memory.storage.mem0.terms import Hit, mem0_filter, to_entity_id
from kaos_memory.storage.ranking import pool_size

from tests.support.devmodel import DevModel
from tests.support.storage import longterm_store, settings_mem0_config

GROUP = "heldfacts"
PRINCIPALS = ["alice", "bob smith"]  # one with whitespace: entity-id escaped
AGENTS = ["kaos://agent/team/alpha", "kaos://agent/team/beta"]
SESSIONS = ["s0", "s1", "s2"]
POOL = pool_size(10)


def _settings(tmp_path: Path, devmodel: DevModel, cache_mb: int = 64) -> MemorySettings:
    return MemorySettings(
        storage="local",
        data_dir=tmp_path,
        collection=GROUP,
        model_base_url=devmodel.base_url,
        embedding_dims=devmodel.embedding_dims,
        vector_cache_mb=cache_mb,
    )


def _payload(principal: str, agent: str, session: str, n: int) -> dict[str, Any]:
    return {
        "data": f"{principal} fact {n}",
        "created_at": f"2026-03-01T10:00:{n % 60:02d}+00:00",
        "user_id": to_entity_id(principal),
        "agent_id": to_entity_id(agent),
        "run_id": to_entity_id(session),
        "kaos_group": GROUP,
        "kaos_run": session,
    }


def _vector(rng: random.Random, dims: int) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(dims)]


@pytest.fixture
async def store(
    tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Mem0LongTermStore]:
    """A started local store over 300 facts of two principals (and 30 without one),
    inserted as the benchmarks preload them and indexed at start."""
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    settings = _settings(tmp_path, devmodel)
    settings.backend.mem0_dir.mkdir(parents=True)
    settings.backend.chroma_dir.mkdir(parents=True)
    monkeypatch.setenv("MEM0_DIR", str(settings.backend.mem0_dir))
    from mem0 import Memory

    rng = random.Random(7)
    memory = Memory.from_config(settings_mem0_config(settings))
    try:
        rows = []
        for n in range(330):
            payload = _payload(PRINCIPALS[n % 2], AGENTS[n % 3 % 2], SESSIONS[n % len(SESSIONS)], n)
            if n >= 300:
                del payload["user_id"]
            rows.append((str(uuid.uuid4()), _vector(rng, settings.models.embedding_dims), payload))
        memory.vector_store.insert(
            vectors=[r[1] for r in rows], ids=[r[0] for r in rows], payloads=[r[2] for r in rows]
        )
    finally:
        memory.close()
    s = longterm_store(settings)
    await s.start()  # reconciles the listing index: every fact is indexed
    try:
        yield s
    finally:
        await s.close()


def _scope(level: str, principal: str, agent: str = AGENTS[0], session: str = "s0") -> Scope:
    return Scope(level, GROUP, session, principal, agent)  # type: ignore[arg-type]


async def _held_search(store: Mem0LongTermStore, scope: Scope, vector: list[float]) -> list[Hit]:
    """The search from the held facts (loading them first if they are not held)."""
    held: ChromaPrincipalCache = store.backend.cache
    filters = mem0_filter(scope)
    key = principal_key(filters)
    assert key is not None
    hits = await held.search(key, filters, vector, POOL)
    if hits is None:
        await held.loaded()
        hits = await held.search(key, filters, vector, POOL)
    assert hits is not None, "the principal should be held by now"
    return hits


def _chroma(store: Mem0LongTermStore, scope: Scope, vector: list[float]) -> list[Hit]:
    return store.backend.query("", vector, mem0_filter(scope), POOL)


def _same(held: list[Hit], chroma: list[Hit]) -> None:
    assert [h[0] for h in held] == [c[0] for c in chroma]
    assert [h[2] for h in held] == [c[2] for c in chroma]
    for h, c in zip(held, chroma, strict=True):
        assert h[1] == pytest.approx(c[1], rel=1e-5)


async def test_held_searches_answer_what_chroma_answers(
    store: Mem0LongTermStore, devmodel: DevModel
) -> None:
    rng = random.Random(11)
    scopes = [
        _scope("user", "alice"),
        _scope("user", "bob smith"),
        _scope("agent", "alice", AGENTS[1]),
        _scope("session", "bob smith", session="s2"),
    ]
    for scope in scopes:
        for _ in range(5):
            vector = _vector(rng, devmodel.embedding_dims)
            held, chroma = await _held_search(store, scope, vector), _chroma(store, scope, vector)
            assert len(held) == min(
                POOL, len(chromafacts.scope_ids(store.memory, mem0_filter(scope)) or [])
            )
            _same(held, chroma)
            assert all(h[2]["user_id"] == to_entity_id(scope.principal or "") for h in held)
    # A scope naming an agent the principal has no fact of: nothing, without Chroma.
    empty = _scope("agent", "alice", "kaos://agent/team/nobody")
    assert await _held_search(store, empty, _vector(rng, devmodel.embedding_dims)) == []
    # Scopes without a principal are not held: the store's search goes to Chroma.
    assert principal_key(mem0_filter(Scope("agent", GROUP, "s0", None, AGENTS[0]))) is None
    assert principal_key(mem0_filter(Scope("store", GROUP, "s0", None, None))) is None
    assert store.held_principals() == (2, 0)


async def test_a_write_is_seen_by_the_next_search_and_by_the_reloaded_principal(
    store: Mem0LongTermStore, devmodel: DevModel
) -> None:
    scope = _scope("agent", "alice")
    await _held_search(store, scope, [1.0] * devmodel.embedding_dims)
    text = "alice keeps bees on the roof of the old library"
    turn = TurnRow(0, "user", text, 9, "2026-03-01T11:00:00+00:00", "alice", AGENTS[0], False)
    (fact_id,) = await store.add(
        [turn], Attribution(GROUP, "s0", "alice", AGENTS[0]), False, FoldTag(1, 1)
    )
    assert not store.backend.cache.holds(("heldfacts", "alice")), "the write dropped alice"
    # The next search, before any reload: Chroma's answer, with the new fact.
    first = await store.search(scope, text, 10)
    assert first[0].id == fact_id
    # Reloaded, the held answer is the same.
    await store.backend.cache.loaded()
    assert store.backend.cache.holds((GROUP, "alice"))
    assert [f.id for f in await store.search(scope, text, 10)] == [f.id for f in first]


async def test_a_principal_held_without_facts_costs_no_embedding_until_its_first_fact(
    store: Mem0LongTermStore, devmodel: DevModel
) -> None:
    """A new user's recall: nothing to search, so no query embedding (a model call); the
    write of their first fact drops what is held, and the next search embeds and finds it."""
    scope = _scope("agent", "carol")
    assert await store.search(scope, "where does carol live", 10) == []  # loads carol
    await store.backend.cache.loaded()
    assert store.backend.cache.holds((GROUP, "carol"))
    before = devmodel.stats()["embeddings"]
    assert await store.search(scope, "where does carol live", 10) == []
    assert await store.search(_scope("session", "carol"), "and now?", 10) == []
    assert devmodel.stats()["embeddings"] == before

    text = "carol lives on a houseboat in Utrecht"
    turn = TurnRow(0, "user", text, 9, "2026-03-01T11:00:00+00:00", "carol", AGENTS[0], False)
    (fact_id,) = await store.add(
        [turn], Attribution(GROUP, "s0", "carol", AGENTS[0]), False, FoldTag(1, 1)
    )
    before = devmodel.stats()["embeddings"]
    assert [f.id for f in await store.search(scope, "where does carol live", 10)] == [fact_id]
    assert devmodel.stats()["embeddings"] == before + 1
    # Held again with the fact: a scope holding none of it (another agent's) still costs
    # no embedding; one holding it does.
    await store.backend.cache.loaded()
    other = _scope("agent", "carol", agent=AGENTS[1])
    before = devmodel.stats()["embeddings"]
    assert await store.search(other, "where does carol live", 10) == []
    assert devmodel.stats()["embeddings"] == before
    assert [f.id for f in await store.search(scope, "carol", 10)] == [fact_id]
    assert devmodel.stats()["embeddings"] == before + 1


async def test_an_erased_fact_never_comes_back(
    store: Mem0LongTermStore, devmodel: DevModel
) -> None:
    rng = random.Random(5)
    vector = _vector(rng, devmodel.embedding_dims)
    bob = _scope("user", "bob smith")
    victim = (await _held_search(store, bob, vector))[0][0]
    assert await store.erase_ids([victim]) == 1
    assert victim not in {
        h[0] for h in await store.backend.search("", vector, mem0_filter(bob), POOL)
    }
    assert victim not in {h[0] for h in await _held_search(store, bob, vector)}

    alice = _scope("user", "alice")
    assert await _held_search(store, alice, vector)
    assert await store.erase(alice) == 150
    assert await store.backend.search("", vector, mem0_filter(alice), POOL) == []
    assert await _held_search(store, alice, vector) == []
    cache = store.backend.cache
    assert cache.holds(key := (GROUP, "alice")) and store.held_principals()[0] == 0, key
    # Every principal was dropped by the deletions; bob, loaded again, lacks the victim.
    assert victim not in {h[0] for h in await _held_search(store, bob, vector)}
    assert store.held_principals()[0] == 1


async def test_a_load_that_met_a_change_is_not_kept(
    store: Mem0LongTermStore, devmodel: DevModel
) -> None:
    """A write that begins and ends while a load reads: the load read Chroma before the
    write, so what it read is thrown away and the next search loads again."""
    held: ChromaPrincipalCache = store.backend.cache
    key = (GROUP, "alice")
    text = "alice repairs clocks on sundays"
    written: list[str] = []
    loop = asyncio.get_running_loop()

    def read_then_write(k: Any) -> Any:
        loaded = chromaheld.read(store.memory, k)
        turn = TurnRow(0, "user", text, 6, "2026-03-01T11:00:00+00:00", "alice", AGENTS[0], False)
        add = store.add([turn], Attribution(GROUP, "s0", "alice", AGENTS[0]), False, FoldTag(1, 1))
        written.extend(asyncio.run_coroutine_threadsafe(add, loop).result())
        return loaded

    held._reader = read_then_write
    scope = _scope("agent", "alice")
    filters = mem0_filter(scope)
    vector = await store._embedder.embed(text)
    assert await held.search(key, filters, vector, POOL) is None
    await held.loaded()
    assert written and not held.holds(key), "the load that met the write was kept"
    held._reader = lambda k: chromaheld.read(store.memory, k)
    hits = await _held_search(store, scope, vector)
    assert hits[0][0] == written[0]


async def test_principals_beyond_the_budget_are_served_by_chroma(
    store: Mem0LongTermStore, devmodel: DevModel
) -> None:
    held: ChromaPrincipalCache = store.backend.cache
    held.max_bytes = 1000  # less than one principal's facts
    scope = _scope("user", "alice")
    filters = mem0_filter(scope)
    key = principal_key(filters)
    assert key is not None
    vector = _vector(random.Random(2), devmodel.embedding_dims)
    assert await held.search(key, filters, vector, POOL) is None
    await held.loaded()
    # Refused: still not held, and not loaded again on every search.
    assert await held.search(key, filters, vector, POOL) is None
    assert held.stats() == (0, 0)
    # The store's search asks Chroma.
    hits = await store.backend.search("", vector, filters, POOL)
    assert len(hits) == POOL and hits == _chroma(store, scope, vector)


async def test_no_budget_holds_nothing(
    tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    s = longterm_store(_settings(tmp_path, devmodel, cache_mb=0))
    await s.start()
    try:
        assert s.backend.cache is None
        text = "bob likes long walks"
        turn = TurnRow(0, "user", text, 5, "2026-03-01T11:00:00+00:00", "bob", AGENTS[0], False)
        (fact_id,) = await s.add(
            [turn], Attribution(GROUP, "s0", "bob", AGENTS[0]), False, FoldTag(1, 1)
        )
        found = await asyncio.gather(*(s.search(_scope("user", "bob"), text, 10) for _ in range(3)))
        assert all(f[0].id == fact_id for f in found)
        assert s.held_principals() == (0, 0)
    finally:
        await s.close()
