"""A principal's fact vectors held in the service (``storage.mem0.pgvector.cache``), on a
real PostgreSQL with the partitioned table KAOS creates: answers equal the database's exact
search, a change by anyone (another replica, Mem0, SQL) is seen by the next search, an
erased fact never comes back, and no id can bring in another principal's or group's fact."""

from __future__ import annotations

import random
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kaos_memory.storage.mem0 import cache as held
from kaos_memory.storage.mem0.pgvector import facts as pgfacts
from kaos_memory.storage.mem0.pgvector.cache import MIN_FACTS, PgvectorPrincipalCache
from kaos_memory.storage.pgpool import Coalesced
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from tests.support.postgres import connect, insert_facts, mem0_pgvector, pg_query

pytestmark = pytest.mark.postgres

TABLE = "kaos_held"
DIMS = 8
LIMIT = 60
ALICE = ("g", "alice")


def _vector(rng: random.Random) -> list[float]:
    return [rng.uniform(-1, 1) for _ in range(DIMS)]


def _insert(dsn: str, rows: list[tuple[str, list[float], dict[str, Any]]]) -> None:
    insert_facts(dsn, TABLE, rows)


def _facts(group: str, principal: str, count: int, rng: random.Random) -> list[Any]:
    return [
        (
            str(uuid.uuid4()),
            _vector(rng),
            {"data": f"{principal} fact {i}", "user_id": principal, "kaos_group": group},
        )
        for i in range(count)
    ]


@pytest.fixture
async def table(pg_dsn: str) -> AsyncIterator[str]:
    store = mem0_pgvector(pg_dsn, TABLE, DIMS)
    try:
        assert pgfacts.create_partitioned(store, DIMS, 8)
        store._ensure_collection()
        pgfacts.ensure_indexes(store.connection_pool, TABLE)
        pgfacts.ensure_versions(store.connection_pool, TABLE)
        pgfacts.ensure_versions(store.connection_pool, TABLE)  # a restart, or a replica
    finally:
        store.connection_pool.close()
    rng = random.Random(3)
    _insert(pg_dsn, _facts("g", "alice", MIN_FACTS + 200, rng))
    _insert(pg_dsn, _facts("g", "bob", 50, rng))
    # The same principal's name in another group, with facts nearer than alice's own.
    _insert(pg_dsn, _facts("h", "alice", MIN_FACTS + 10, rng))
    yield pg_dsn


@pytest.fixture
async def pool(table: str) -> AsyncIterator[Any]:
    p: AsyncConnectionPool[Any] = AsyncConnectionPool(
        table, kwargs={"autocommit": True}, min_size=1, max_size=2, open=False
    )
    await p.open(wait=True)
    try:
        yield p
    finally:
        await p.close()


@pytest.fixture
async def vectors() -> AsyncIterator[PgvectorPrincipalCache]:
    v = PgvectorPrincipalCache(TABLE, 64 * 2**20)
    try:
        yield v
    finally:
        await v.close()


async def _exact(pool: Any, key: tuple[str, str], query: list[float]) -> list[Any]:
    sql_text, params = pgfacts.search_query(
        TABLE, query, {"kaos_group": key[0], "user_id": key[1]}, LIMIT
    )
    async with pool.connection() as conn:
        return list(await (await conn.execute(sql_text, params)).fetchall())


async def _search(
    vectors: PgvectorPrincipalCache, pool: Any, key: tuple[str, str], query: list[float]
) -> list[Any]:
    sql_text, params = pgfacts.search_query(
        TABLE, query, {"kaos_group": key[0], "user_id": key[1]}, LIMIT
    )
    # The search's reads share round trips with any others, as in the service.
    return await vectors.search(Coalesced(pool), key, query, sql_text, params, LIMIT)


async def _held_alice(
    vectors: PgvectorPrincipalCache, pool: Any, rng: random.Random
) -> list[float]:
    """A query, once alice's vectors are held (her first search loads them)."""
    query = _vector(rng)
    await _search(vectors, pool, ALICE, query)
    await vectors.loaded()
    assert vectors.holds(ALICE)
    return query


def _same(held: list[Any], exact: list[Any]) -> None:
    assert [str(r[0]) for r in held] == [str(r[0]) for r in exact]
    for h, e in zip(held, exact, strict=True):
        assert h[1] == pytest.approx(e[1], abs=1e-5)
        assert h[2] == e[2]


async def test_a_held_principal_gets_exactly_the_databases_nearest_facts(
    vectors: PgvectorPrincipalCache, pool: Any
) -> None:
    rng = random.Random(11)
    first = _vector(rng)
    # Not held yet: the database answers, and the principal's vectors are loaded.
    _same(await _search(vectors, pool, ALICE, first), await _exact(pool, ALICE, first))
    await vectors.loaded()
    assert vectors.holds(ALICE)
    for _ in range(20):
        query = _vector(rng)
        held = await _search(vectors, pool, ALICE, query)
        assert len(held) == LIMIT
        assert {r[2]["kaos_group"] for r in held} == {"g"}
        assert {r[2]["user_id"] for r in held} == {"alice"}
        _same(held, await _exact(pool, ALICE, query))


async def test_a_small_principal_and_a_tiny_budget_stay_in_the_database(
    pool: Any,
) -> None:
    rng = random.Random(5)
    tiny = PgvectorPrincipalCache(TABLE, 1024)
    try:
        for key in (("g", "bob"), ALICE):
            query = _vector(rng)
            _same(await _search(tiny, pool, key, query), await _exact(pool, key, query))
            await tiny.loaded()
            assert not tiny.holds(key)
            _same(await _search(tiny, pool, key, query), await _exact(pool, key, query))
    finally:
        await tiny.close()


async def test_a_fact_written_by_anyone_is_found_by_the_next_search(
    vectors: PgvectorPrincipalCache, pool: Any, table: str
) -> None:
    query = await _held_alice(vectors, pool, random.Random(13))
    # Another replica stores the nearest fact there is (the query itself).
    new = str(uuid.uuid4())
    _insert(table, [(new, query, {"data": "new", "user_id": "alice", "kaos_group": "g"})])
    found = await _search(vectors, pool, ALICE, query)
    assert str(found[0][0]) == new
    _same(found, await _exact(pool, ALICE, query))
    # Reloaded: the held vectors answer with it too.
    await vectors.loaded()
    assert vectors.holds(ALICE)
    found = await _search(vectors, pool, ALICE, query)
    assert str(found[0][0]) == new
    _same(found, await _exact(pool, ALICE, query))


async def test_an_erased_fact_never_comes_back(
    vectors: PgvectorPrincipalCache, pool: Any, table: str
) -> None:
    query = await _held_alice(vectors, pool, random.Random(17))
    nearest = await _search(vectors, pool, ALICE, query)
    gone = str(nearest[0][0])
    pg_query(table, f"DELETE FROM {TABLE} WHERE id = %s", [gone])
    after = await _search(vectors, pool, ALICE, query)
    assert gone not in {str(r[0]) for r in after}
    _same(after, await _exact(pool, ALICE, query))
    await vectors.loaded()
    # Even a deletion no trigger saw (triggers off for the session) is not answered: the
    # payloads come from the table, and the fact has none any more.
    again = await _search(vectors, pool, ALICE, query)
    hidden = str(again[0][0])
    with connect(table) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE id = %s").format(sql.Identifier(TABLE)), [hidden]
        )
    answered = await _search(vectors, pool, ALICE, query)
    assert vectors.holds(ALICE)
    assert hidden not in {str(r[0]) for r in answered}
    assert len(answered) == LIMIT - 1


def _versions(dsn: str) -> dict[tuple[str, str], int]:
    rows = pg_query(dsn, f"SELECT kaos_group, principal, version FROM {TABLE}_kaos_versions")
    return {(r[0], r[1]): r[2] for r in rows}


def test_each_change_bumps_only_the_principals_it_touches(table: str) -> None:
    before = _versions(table)
    assert set(before) == {("g", "alice"), ("g", "bob"), ("h", "alice")}
    pg_query(
        table,
        f"UPDATE {TABLE} SET payload = payload || '{{\"x\": 1}}' WHERE payload->>'user_id' = 'bob'",
    )
    after_update = _versions(table)
    assert after_update[("g", "bob")] > before[("g", "bob")]
    assert after_update[("g", "alice")] == before[("g", "alice")]
    pg_query(
        table,
        f"DELETE FROM {TABLE} WHERE payload->>'kaos_group' = 'h'",
    )
    after_delete = _versions(table)
    assert after_delete[("h", "alice")] > after_update[("h", "alice")]
    assert after_delete[("g", "alice")] == before[("g", "alice")]
    # A version is never given twice: a truncated table's next insert gets a new one.
    pg_query(table, f"TRUNCATE {TABLE}")
    assert _versions(table) == {}
    _insert(table, _facts("g", "alice", 1, random.Random(1)))
    assert _versions(table)[("g", "alice")] > max(after_delete.values())


async def test_principals_known_by_version_only_are_forgotten_once_idle(
    vectors: PgvectorPrincipalCache, pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(19)
    bob = ("g", "bob")
    await _search(vectors, pool, bob, _vector(rng))
    await vectors.loaded()
    assert bob in vectors._held and not vectors.holds(bob)
    # Idle from now on: the next load (alice's) drops bob's version, alice is held.
    monkeypatch.setattr(held, "IDLE", -1.0)
    await _held_alice(vectors, pool, rng)
    assert bob not in vectors._held
    # Searched again, bob is answered by the database as before, and known again.
    query = _vector(rng)
    _same(await _search(vectors, pool, bob, query), await _exact(pool, bob, query))
    await vectors.loaded()
    assert bob in vectors._held
