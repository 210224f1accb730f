"""Paging of long-term facts on embedded Chroma (``kaos_memory.storage.mem0.chroma.facts``).

Every test drives a real Mem0 ``Memory`` over a real embedded Chroma (the development
model only answers Mem0's embedding calls). The oracle is Chroma's own filter: every row
of the scope through Mem0's ``vector_store.list``, sorted by ``(created_at, id)`` in
Python, which is what local-mode listing did before. Writes go through Mem0's vector store
(precomputed vectors) or ``Memory.add``, each followed by ``chromafacts.record`` and each
deletion by ``forget``, as the service's write paths do. Sync tests: Mem0 blocks.
"""

from __future__ import annotations

import itertools
import random
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kaos_memory.scope import Scope
from kaos_memory.settings import MemorySettings
from kaos_memory.storage.mem0.chroma import facts as chromafacts
from kaos_memory.storage.mem0.terms import WILDCARD, mem0_filter, to_entity_id

from tests.support.devmodel import DevModel
from tests.support.storage import longterm_store, settings_mem0_config

GROUP = "facts"
PRINCIPALS = ["alice", "bob smith", "carol"]  # one with whitespace: entity-id escaped
AGENTS = ["kaos://agent/team/alpha", "kaos://agent/team/beta"]
SESSIONS = [f"s{i}" for i in range(6)]
DIMS = 64
Key = tuple[str, str]


@pytest.fixture
def memory(tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    settings = MemorySettings(
        storage="local",
        data_dir=tmp_path,
        collection="chromafacts",
        model_base_url=devmodel.base_url,
        embedding_dims=devmodel.embedding_dims,
    )
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    monkeypatch.setenv("MEM0_DIR", str(settings.backend.mem0_dir))
    settings.backend.mem0_dir.mkdir(parents=True)
    settings.backend.chroma_dir.mkdir(parents=True)
    from mem0 import Memory

    mem = Memory.from_config(settings_mem0_config(settings))
    try:
        yield mem
    finally:
        mem.close()


def payload(rng: random.Random, n: int, created_at: str) -> dict[str, Any]:
    """A fact's metadata as KAOS stores it; one in five without a principal."""
    session = rng.choice(SESSIONS)
    principal = None if rng.random() < 0.2 else rng.choice(PRINCIPALS)
    out = {
        "data": f"fact {n}",
        "created_at": created_at,
        "agent_id": to_entity_id(rng.choice(AGENTS)),
        "run_id": to_entity_id(session),
        "kaos_group": GROUP,
        "kaos_run": session,
    }
    if principal is not None:
        out["user_id"] = to_entity_id(principal)
    return out


def load(
    memory: Any, count: int, rng: random.Random, *, batch: int = 500, record: bool = True
) -> list[str]:
    """Insert ``count`` facts through Mem0's vector store, out of ``created_at`` order and
    with ties on ``created_at`` (two facts per instant), as racing writers produce them."""
    stamps = [
        f"2026-03-01T10:00:{i // 2 // 1000:02d}.{i // 2 % 1000:03d}000+00:00" for i in range(count)
    ]
    rng.shuffle(stamps)
    ids = []
    for start in range(0, count, batch):
        chunk = stamps[start : start + batch]
        chunk_ids = [str(uuid.uuid4()) for _ in chunk]
        memory.vector_store.insert(
            vectors=[[rng.random() for _ in range(DIMS)] for _ in chunk],
            ids=chunk_ids,
            payloads=[payload(rng, start + i, s) for i, s in enumerate(chunk)],
        )
        if record:
            chromafacts.record(memory, chunk_ids)
        ids += chunk_ids
    return ids


def key(fact_id: str, item: dict[str, Any]) -> Key:
    return (str(item.get("created_at") or ""), fact_id)


def oracle(memory: Any, filters: dict[str, str]) -> list[Key]:
    """The scope's facts in order, by Chroma's own filter over every row."""
    listed = memory.vector_store.list(filters=filters, top_k=1_000_000)[0]
    return sorted(key(str(r.id), r.payload) for r in listed)


def pages(memory: Any, filters: dict[str, str], limit: int) -> list[list[tuple[str, Any]]]:
    """Every page of a scope, each continued after the last fact of the one before."""
    out: list[list[tuple[str, Any]]] = []
    after = None
    while True:
        page = chromafacts.page(memory, filters, limit, after)
        assert len(page) <= limit
        if not page:
            return out
        out.append(page)
        after = key(*page[-1])


def listed(memory: Any, filters: dict[str, str], limit: int = 100) -> list[Key]:
    return [key(f, p) for page in pages(memory, filters, limit) for f, p in page]


def scopes() -> dict[str, Scope]:
    """One scope of each level and shape the service sends."""
    alice, alpha = PRINCIPALS[0], AGENTS[0]
    return {
        "store": Scope("store", GROUP, None, None, None),
        "user": Scope("user", GROUP, "s0", alice, None),
        "agent": Scope("agent", GROUP, "s0", None, alpha),
        "agent+principal": Scope("agent", GROUP, "s0", alice, alpha),
        "session": Scope("session", GROUP, "s1", None, None),
        "session+principal": Scope("session", GROUP, "s1", alice, None),
    }


def test_pages_of_every_scope_follow_created_at_then_id_over_thousands_of_facts(
    memory: Any,
) -> None:
    rng = random.Random(20)
    load(memory, 3000, rng)
    # And facts through Mem0's own write path (it sets created_at itself).
    for i in range(5):
        result = memory.add(
            f"written through mem0 {i}",
            user_id=to_entity_id(PRINCIPALS[0]),
            agent_id=to_entity_id(AGENTS[0]),
            run_id="s0",
            metadata={"kaos_group": GROUP, "kaos_run": "s0"},
            infer=False,
        )
        chromafacts.record(memory, [r["id"] for r in result["results"]])
    for name, scope in scopes().items():
        filters = mem0_filter(scope)
        expected = oracle(memory, filters)
        assert len(expected) >= 5, name
        got = pages(memory, filters, 100)
        assert [key(f, p) for page in got for f, p in page] == expected, name
        # Full pages until the last; the ties on created_at are broken by id.
        assert all(len(p) == 100 for p in got[:-1]), name
    store = listed(memory, mem0_filter(scopes()["store"]))
    assert len(store) == 3005 and len({f for _, f in store}) == 3005


def test_a_scope_never_shows_another_principals_or_agents_facts(memory: Any) -> None:
    rng = random.Random(7)
    load(memory, 600, rng)
    for principal in PRINCIPALS:
        for agent in AGENTS:
            filters = mem0_filter(Scope("agent", GROUP, "s0", principal, agent))
            facts = [p for page in pages(memory, filters, 50) for _, p in page]
            assert facts, (principal, agent)
            assert {(p["user_id"], p["agent_id"]) for p in facts} == {
                (to_entity_id(principal), to_entity_id(agent))
            }
        filters = mem0_filter(Scope("user", GROUP, "s0", principal, None))
        facts = [p for page in pages(memory, filters, 50) for _, p in page]
        assert {p.get("user_id") for p in facts} == {to_entity_id(principal)}
    # Another store's group sees nothing; facts without a principal only in their scopes.
    assert chromafacts.page(memory, {"kaos_group": "other", "run_id": WILDCARD}, 10, None) == []
    anonymous = [
        p
        for page in pages(memory, mem0_filter(scopes()["agent"]), 50)
        for _, p in page
        if "user_id" not in p
    ]
    assert anonymous


def test_erased_facts_leave_the_pages_and_a_cursor_on_an_erased_fact_still_continues(
    memory: Any,
) -> None:
    rng = random.Random(3)
    load(memory, 500, rng)
    filters = mem0_filter(scopes()["store"])
    first, second = chromafacts.page(memory, filters, 100, None), None
    cursor = key(*first[-1])
    # Erase through Mem0 (as the service does): the cursor's own fact and the next 30.
    following = chromafacts.page(memory, filters, 30, cursor)
    doomed = [first[-1][0], *(f for f, _ in following)]
    for fact_id in doomed:
        memory.delete(fact_id)
    chromafacts.forget(memory, doomed)
    second = chromafacts.page(memory, filters, 100, cursor)
    remaining = oracle(memory, filters)
    assert [key(f, p) for f, p in second] == [k for k in remaining if k > cursor][:100]
    assert not set(doomed) & {f for _, f in listed(memory, filters)}
    assert len(listed(memory, filters)) == 500 - 31


def test_facts_stored_before_the_index_are_listed(memory: Any) -> None:
    rng = random.Random(11)
    load(memory, 300, rng, record=False)  # as before this module: nothing recorded
    filters = mem0_filter(scopes()["store"])
    assert listed(memory, filters) == oracle(memory, filters)
    assert len(oracle(memory, filters)) == 300
    assert chromafacts.reconcile(memory) == (0, 0)  # in place and complete


def test_an_index_that_lost_or_kept_entries_repairs_itself(memory: Any) -> None:
    rng = random.Random(12)
    load(memory, 300, rng)
    filters = mem0_filter(scopes()["store"])
    conn = sqlite3.connect(chromafacts.index_file(memory))
    # Deleted from Chroma without a ``forget`` (a crash between the two): a page drops them.
    dropped = [f for _, f in oracle(memory, filters)[::7]]
    for fact_id in dropped:
        memory.vector_store.delete(fact_id)
    assert listed(memory, filters, limit=40) == oracle(memory, filters)
    left = conn.execute(
        f"SELECT count(*) FROM {chromafacts.TABLE} WHERE fact_id IN"
        f" ({','.join('?' for _ in dropped)})",
        dropped,
    ).fetchone()[0]
    assert left == 0

    # An entry naming the wrong principal never shows the fact in that principal's scope.
    alice = mem0_filter(scopes()["user"])
    bob_fact = next(f for f, p in pages_flat(memory, filters) if p.get("user_id") == "bob%20;smith")
    conn.execute(
        f"UPDATE {chromafacts.TABLE} SET user_id = ? WHERE fact_id = ?",
        (alice["user_id"], bob_fact),
    )
    conn.commit()
    assert bob_fact not in {f for f, _ in pages_flat(memory, alice)}
    assert listed(memory, alice) == oracle(memory, alice)

    # Stored in Chroma but never recorded (a write that failed part-way): the failed
    # write marks the index stale and the next page reconciles; a restart reconciles
    # whatever happened.
    unrecorded = load(memory, 30, rng, record=False)
    chromafacts.mark_stale(memory)
    assert listed(memory, filters) == oracle(memory, filters)
    conn.execute(f"DELETE FROM {chromafacts.TABLE} WHERE fact_id = ?", (unrecorded[0],))
    conn.commit()
    conn.close()
    assert chromafacts.reconcile(memory) == (1, 0)
    assert listed(memory, filters) == oracle(memory, filters)


def pages_flat(memory: Any, filters: dict[str, str]) -> list[tuple[str, Any]]:
    return [item for page in pages(memory, filters, 100) for item in page]


def test_an_update_through_mem0_keeps_the_position_and_serves_the_new_payload(
    memory: Any,
) -> None:
    rng = random.Random(5)
    ids = load(memory, 200, rng)
    filters = mem0_filter(scopes()["store"])
    before = listed(memory, filters)
    target = ids[17]
    memory.update(target, "an updated fact")
    assert listed(memory, filters) == before
    position = next(i for i, (_, f) in enumerate(before) if f == target)
    after = before[position - 1] if position else None
    fact_id, item = chromafacts.page(memory, filters, 1, after)[0]
    assert (fact_id, item["data"]) == (target, "an updated fact")


def test_concurrent_writers_and_erasers_never_break_a_listing(memory: Any) -> None:
    rng = random.Random(9)
    load(memory, 400, rng)
    filters = mem0_filter(scopes()["store"])
    initial = [f for _, f in oracle(memory, filters)]
    stop = threading.Event()
    errors: list[BaseException] = []
    erased: list[str] = []

    def write(seed: int) -> None:
        local = random.Random(seed)
        try:
            while not stop.is_set():
                load(memory, 20, local, batch=5)
        except BaseException as exc:
            errors.append(exc)
            raise

    def erase() -> None:
        try:
            for n, fact_id in enumerate(initial[::4]):
                if stop.is_set():
                    return
                memory.delete(fact_id)
                erased.append(fact_id)
                if n % 2:  # the others are left for the pages to find gone
                    chromafacts.forget(memory, [fact_id])
        except BaseException as exc:
            errors.append(exc)
            raise

    threads = [threading.Thread(target=write, args=(s,)) for s in (1, 2)]
    threads.append(threading.Thread(target=erase))
    for t in threads:
        t.start()
    try:
        for _ in range(5):
            keys = listed(memory, filters, limit=37)
            # Strictly increasing: no fact twice, none out of order, whatever moved.
            assert all(a < b for a, b in itertools.pairwise(keys))
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert not errors
    assert listed(memory, filters, limit=37) == oracle(memory, filters)
    assert erased
    assert not set(erased) & {f for _, f in listed(memory, filters)}


@pytest.mark.parametrize("name", list(scopes()))
def test_every_scope_is_one_index_range_read_without_a_sort(memory: Any, name: str) -> None:
    load(memory, 50, random.Random(1))
    query, params = chromafacts.page_query(
        "chromafacts", mem0_filter(scopes()[name]), 100, ("2026-03-01", "")
    )
    with sqlite3.connect(chromafacts.index_file(memory)) as conn:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", params)]
    index = chromafacts.SHAPES[
        frozenset(k for k, v in mem0_filter(scopes()[name]).items() if v != WILDCARD)
    ]
    # One range of one index, in the index's order: no sort, no scan of the scope.
    assert plan == [
        f"SEARCH {chromafacts.TABLE} USING INDEX {index} ({plan[0].split(' (', 1)[1]}"
    ], plan
    assert "(created_at,fact_id)>(?,?)" in plan[0], plan


def test_a_filter_on_a_key_the_index_lacks_is_refused(memory: Any) -> None:
    with pytest.raises(ValueError, match="kaos_fold"):
        chromafacts.page(memory, {"kaos_group": GROUP, "kaos_fold": "3"}, 10, None)
    assert chromafacts.page(memory, {"kaos_group": GROUP}, 0, None) == []


# --- searches by the scope's ids --------------------------------------------------------


def test_a_scopes_ids_are_exactly_its_facts_once_the_index_is_complete(memory: Any) -> None:
    load(memory, 1200, random.Random(11))
    some = mem0_filter(scopes()["agent+principal"])
    # Recorded facts alone do not make the index complete: Chroma may hold others.
    assert chromafacts.scope_ids(memory, some) is None
    chromafacts.reconcile(memory)
    for name, scope in scopes().items():
        filters = mem0_filter(scope)
        ids = chromafacts.scope_ids(memory, filters)
        assert ids is not None and len(ids) == len(set(ids)), name
        assert sorted(ids) == sorted(f for _, f in oracle(memory, filters)), name
    chromafacts.mark_stale(memory)
    assert chromafacts.scope_ids(memory, some) is None


def test_the_index_reader_sees_every_change_on_the_connections_it_keeps(memory: Any) -> None:
    """A recall's reader keeps its connections between searches: each read still sees
    the index as the last commit left it, from any recall lane at once."""
    loaded = load(memory, 300, random.Random(5))
    chromafacts.reconcile(memory)
    reader = chromafacts.IndexReader(memory)
    filters = [mem0_filter(scope) for scope in scopes().values()]

    def same() -> None:
        for f in filters:
            found = reader.scope_ids(f)
            assert found is not None and sorted(found) == sorted(i for _, i in oracle(memory, f))

    same()
    with ThreadPoolExecutor(max_workers=4) as lanes:
        answers = list(lanes.map(reader.scope_ids, filters * 20))
    assert answers == [reader.scope_ids(f) for f in filters] * 20
    gone = loaded[:100]
    chromafacts.forget(memory, gone)
    for fact_id in gone:
        memory.vector_store.delete(fact_id)
    same()
    load(memory, 50, random.Random(6))
    same()
    chromafacts.mark_stale(memory)
    assert reader.scope_ids(filters[0]) is None
    reader.close()
    with pytest.raises(RuntimeError, match="closed"):
        reader.scope_ids(filters[0])


@pytest.mark.parametrize("name", list(scopes()))
def test_a_scopes_ids_are_one_index_only_read(memory: Any, name: str) -> None:
    load(memory, 50, random.Random(1))
    filters = mem0_filter(scopes()[name])
    query, params = chromafacts.ids_query("chromafacts", filters)
    with sqlite3.connect(chromafacts.index_file(memory)) as conn:
        plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", params)]
    index = chromafacts.SHAPES[frozenset(k for k, v in filters.items() if v != WILDCARD)]
    assert len(plan) == 1 and plan[0].startswith(
        f"SEARCH {chromafacts.TABLE} USING COVERING INDEX {index} ("
    ), plan


async def test_recall_by_indexed_ids_finds_the_scopes_facts_only_and_survives_a_stale_entry(
    tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kaos_memory.scope import Attribution
    from kaos_memory.storage.base import FoldTag, TurnRow

    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    settings = MemorySettings(
        storage="local",
        data_dir=tmp_path,
        collection=GROUP,
        model_base_url=devmodel.base_url,
        embedding_dims=devmodel.embedding_dims,
        # Every search asks Chroma: no principal's facts held (``test_chromaheld``).
        vector_cache_mb=0,
    )
    store = longterm_store(settings)
    await store.start()
    try:
        topics = ["violin lessons", "marathon training", "sourdough baking", "tax return"]
        owners = [(p, a) for p in PRINCIPALS for a in AGENTS]
        ids: dict[tuple[str, str, str], str] = {}
        for seq, (topic, (principal, agent)) in enumerate(itertools.product(topics, owners)):
            text = f"{principal} talks about {topic}"
            turn = TurnRow(
                seq, "user", text, 5, "2026-03-01T10:00:00+00:00", principal, agent, False
            )
            attribution = Attribution(GROUP, "s0", principal, agent)
            (ids[(topic, principal, agent)],) = await store.add(
                [turn], attribution, False, FoldTag(1, 1)
            )

        async def recall(principal: str, agent: str, topic: str) -> list[Any]:
            scope = Scope("agent", GROUP, "s0", principal, agent)
            return await store.search(scope, f"{principal} talks about {topic}", 10)

        def owned(facts: list[Any], principal: str, agent: str) -> bool:
            return {(f.user_id, f.agent_id) for f in facts} == {(principal, agent)}

        # Written facts are recorded, and the index was reconciled at start: complete.
        principal, agent = PRINCIPALS[1], AGENTS[0]
        named = chromafacts.scope_ids(
            store.memory, mem0_filter(Scope("agent", GROUP, "s0", principal, agent))
        )
        assert named is not None and sorted(named) == sorted(
            ids[(t, principal, agent)] for t in topics
        )
        by_ids = await recall(principal, agent, "sourdough baking")
        assert by_ids[0].id == ids[("sourdough baking", principal, agent)]
        assert len(by_ids) == len(topics) and owned(by_ids, principal, agent)

        # Chroma's own filter (the index not known complete) gives the same answer.
        chromafacts.mark_stale(store.memory)
        assert [f.id for f in await recall(principal, agent, "sourdough baking")] == [
            f.id for f in by_ids
        ]
        chromafacts.reconcile(store.memory)

        # A fact deleted behind KAOS's back: Chroma refuses its id, the search still
        # answers (by Chroma's filter) and without it.
        gone = ids[("sourdough baking", principal, agent)]
        store.memory.vector_store.delete(gone)
        after = await recall(principal, agent, "sourdough baking")
        assert after and gone not in {f.id for f in after} and owned(after, principal, agent)

        # An erasure through KAOS leaves the index naming only what Chroma holds.
        erased = ids[("tax return", principal, agent)]
        assert await store.erase_ids([erased]) == 1
        chromafacts.reconcile(store.memory)  # drops the entry deleted behind KAOS's back
        left = await recall(principal, agent, "tax return")
        assert erased not in {f.id for f in left} and owned(left, principal, agent)
    finally:
        await store.close()
