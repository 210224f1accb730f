"""KAOS's tenant-filtered queries (``storage.mem0.pgvector.facts``) on the table Mem0's own
pgvector store creates (HNSW index included), on a real PostgreSQL, in both layouts: the
table partitioned by principal that KAOS creates for a new store, and Mem0's single table
(a store created before, or ``KAOS_MEMORY_PG_PARTITIONS=0``). A principal's search is
exact (the ``limit`` nearest of its facts, never an HNSW index's first candidates), a
principal's page is read in order through its index, and a partitioned table reads the
principal's partition only."""

from __future__ import annotations

import math
import random
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kaos_memory.storage.mem0.pgvector import facts as pgfacts
from psycopg import sql

from tests.support.postgres import generic_plan, insert_facts, mem0_pgvector, pg_query
from tests.support.storage import pg_search

pytestmark = pytest.mark.postgres

TABLE = "kaos_facts"
DIMS = 8
PRINCIPALS = ("alice", "bob", "carol")
AGENTS = ("planner", "coder")
PER_PRINCIPAL = 1000
# More than hnsw.ef_search (40): an HNSW scan without iterative scanning hands the
# filter at most 40 candidates, so it could not return this many of one principal.
LIMIT = 60


PARTITIONS = 8


@pytest.fixture(params=["partitioned", "single"])
def store(pg_dsn: str, request: pytest.FixtureRequest) -> Iterator[Any]:
    s = (
        _partitioned(pg_dsn)
        if request.param == "partitioned"
        else mem0_pgvector(pg_dsn, TABLE, DIMS)
    )
    s._ensure_collection()
    try:
        yield s
    finally:
        s.connection_pool.close()


def _rows(rng: random.Random) -> list[tuple[str, list[float], dict[str, Any]]]:
    rows = []
    for i in range(PER_PRINCIPAL * len(PRINCIPALS)):
        payload = {
            "data": f"fact {i}",
            "user_id": PRINCIPALS[i % len(PRINCIPALS)],
            "agent_id": AGENTS[i % len(AGENTS)],
            "run_id": f"s{i % 7}",
            "kaos_group": "g",
            # Ties on purpose: the id orders facts stored in the same millisecond.
            "created_at": f"2026-01-01T00:00:{(i // 9) % 60:02d}",
        }
        rows.append((str(uuid.uuid4()), [rng.uniform(-1, 1) for _ in range(DIMS)], payload))
    return rows


def _load(dsn: str, rows: list[tuple[str, list[float], dict[str, Any]]]) -> None:
    insert_facts(dsn, TABLE, rows)
    pg_query(dsn, f"VACUUM ANALYZE {TABLE}")


def _cosine_distance(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return 1 - dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def _generic_plan(pool: Any, query: sql.Composed, params: list[Any]) -> str:
    """The plan a pooled connection runs once psycopg has prepared the statement."""
    with pool.connection() as conn:
        return "\n".join(generic_plan(conn, query, params))


def _indexes(dsn: str) -> dict[str, str]:
    return {
        r[0]: r[1]
        for r in pg_query(
            dsn, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [TABLE]
        )
    }


def test_indexes_are_created_once_and_again_without_error(store: Any, pg_dsn: str) -> None:
    # An index an earlier version created, which one ending with the group replaces.
    pg_query(pg_dsn, f"CREATE INDEX {TABLE}_kaos_user_id_idx ON {TABLE} ((payload->>'user_id'))")
    pgfacts.ensure_indexes(store.connection_pool, TABLE)
    pgfacts.ensure_indexes(store.connection_pool, TABLE)  # a restart, or a second replica
    found = _indexes(pg_dsn)
    for name in ("user_id_group", "agent_id_group", "run_id_group", "agent_user_group"):
        assert f"{TABLE}_kaos_{name}_idx" in found, found
        assert "kaos_group" in found[f"{TABLE}_kaos_{name}_idx"]
    assert "created_at" in found[f"{TABLE}_kaos_user_order_idx"]
    assert f"{TABLE}_kaos_user_id_idx" not in found, found


@pytest.mark.parametrize("agent", [None, "coder"])
def test_a_principal_gets_exactly_its_nearest_facts_in_order(
    store: Any, pg_dsn: str, agent: str | None
) -> None:
    pool = store.connection_pool
    pgfacts.ensure_indexes(pool, TABLE)
    rng = random.Random(7)
    rows = _rows(rng)
    _load(pg_dsn, rows)
    query = [rng.uniform(-1, 1) for _ in range(DIMS)]
    filters = {"kaos_group": "g", "user_id": "bob"}
    if agent is not None:
        filters["agent_id"] = agent
    mine = [
        (i, _cosine_distance(v, query))
        for i, v, p in rows
        if all(p[k] == value for k, value in filters.items())
    ]
    expected = [i for i, _ in sorted(mine, key=lambda m: m[1])[:LIMIT]]

    # More runs than psycopg's prepare threshold: the prepared statement's plans too.
    for _ in range(8):
        hits = pg_search(pool, TABLE, query, filters, LIMIT)
        assert [h[0] for h in hits] == expected
    assert all(h[2]["user_id"] == "bob" for h in hits)
    scores = [h[1] for h in hits]
    assert scores == sorted(scores, reverse=True)
    by_id = dict(mine)
    assert all(abs(h[1] - (1 - by_id[h[0]])) < 1e-5 for h in hits)
    plan = _generic_plan(pool, *pgfacts.search_query(TABLE, query, filters, LIMIT))
    assert "hnsw" not in plan, plan
    if "Append" in plan:
        # Partitioned: one partition (here only bob's: reading all of it is the plan).
        assert f"Subplans Removed: {PARTITIONS - 1}" in plan, plan
    else:
        assert "Seq Scan" not in plan, plan


def test_a_principal_pages_in_order_through_its_index(store: Any, pg_dsn: str) -> None:
    pool = store.connection_pool
    pgfacts.ensure_indexes(pool, TABLE)
    rows = _rows(random.Random(3))
    _load(pg_dsn, rows)
    filters = {"kaos_group": "g", "user_id": "carol"}
    expected = sorted((p["created_at"], i) for i, _, p in rows if p["user_id"] == "carol")
    seen: list[tuple[str, str]] = []
    after = None
    while True:
        page = pgfacts.page(pool, TABLE, filters, 100, after)
        seen += [(p["created_at"], i) for i, p in page]
        if len(page) < 100:
            break
        after = seen[-1]
    assert seen == expected
    # A page after a cursor reads the principal's facts in order from the cursor on.
    plan = _generic_plan(pool, *pgfacts.page_query(TABLE, filters, 100, expected[500]))
    nodes = [line.strip().removeprefix("->").strip() for line in plan.splitlines()]
    # The order index, or (partitioned) its copy on the principal's partition.
    ordered = [n for n in nodes if n.startswith("Index Scan using")]
    assert len(ordered) == 1, plan
    assert "coalesce_id_idx" in ordered[0] or f"{TABLE}_kaos_user_order_idx" in ordered[0], plan
    assert not [n for n in nodes if n.split("  (")[0] in ("Sort", "Incremental Sort")], plan


def _partitioned(pg_dsn: str) -> Any:
    """Mem0's store on a table created as the service creates a new store's."""
    s = mem0_pgvector(pg_dsn, TABLE, DIMS)
    assert pgfacts.create_partitioned(s, DIMS, PARTITIONS)
    s._ensure_collection()
    return s


def test_a_principal_is_read_from_its_partition_only(pg_dsn: str) -> None:
    store = _partitioned(pg_dsn)
    try:
        pool = store.connection_pool
        pgfacts.ensure_indexes(pool, TABLE)
        rows = _rows(random.Random(5))
        _load(pg_dsn, rows)
        # Each principal's rows are in one partition, and Mem0's indexes are on each one.
        placed = pg_query(
            pg_dsn,
            f"SELECT payload->>'user_id', count(DISTINCT tableoid) FROM {TABLE} GROUP BY 1",
        )
        assert sorted(placed) == [(p, 1) for p in sorted(PRINCIPALS)]
        found = _indexes(pg_dsn)
        assert f"{TABLE}_hnsw_idx" in found and f"{TABLE}_id_idx" in found, found
        partition_indexes = pg_query(
            pg_dsn,
            "SELECT count(*) FROM pg_indexes WHERE tablename = %s AND indexdef LIKE %s",
            [f"{TABLE}_p0", "%USING hnsw%"],
        )
        assert partition_indexes == [(1,)]
        query = [1.0] + [0.0] * (DIMS - 1)
        for filters in (
            {"kaos_group": "g", "user_id": "alice"},
            {"kaos_group": "g", "user_id": "alice", "agent_id": "coder"},
            {"kaos_group": "g", "user_id": "alice", "run_id": "s3"},
        ):
            # Under the generic plan the partition is chosen when the statement runs.
            plan = _generic_plan(pool, *pgfacts.search_query(TABLE, query, filters, LIMIT))
            scanned = set(re.findall(rf" on ({TABLE}_p\d+) ", plan))
            assert len(scanned) == 1 and f"Subplans Removed: {PARTITIONS - 1}" in plan, plan
            page = _generic_plan(pool, *pgfacts.page_query(TABLE, filters, 100, None))
            assert f"Subplans Removed: {PARTITIONS - 1}" in page, page
    finally:
        store.connection_pool.close()


def test_mem0_reads_and_writes_the_partitioned_table(pg_dsn: str) -> None:
    """Mem0's own statements (by id, by a bound filter key) run unchanged on it."""
    store = _partitioned(pg_dsn)
    try:
        ids = [str(uuid.uuid4()) for _ in range(3)]
        vectors = [[1.0] + [0.0] * (DIMS - 1), [0.0, 1.0] + [0.0] * (DIMS - 2)] * 2
        payloads = [
            {"data": "alice's", "user_id": "alice", "kaos_group": "g"},
            {"data": "bob's", "user_id": "bob", "kaos_group": "g"},
            {"data": "nobody's", "kaos_group": "g"},  # no principal: a partition too
        ]
        store.insert(vectors=vectors[:3], ids=ids, payloads=payloads)
        assert store.get(ids[0]).payload["data"] == "alice's"
        store.update(ids[1], vector=vectors[0], payload={**payloads[1], "data": "bob's, again"})
        assert store.get(ids[1]).payload["data"] == "bob's, again"
        hits = store.search(query="", vectors=vectors[0], top_k=5, filters={"user_id": "bob"})
        assert [str(h.id) for h in hits] == [ids[1]]
        listed = store.list(filters={"kaos_group": "g"}, top_k=10)[0]
        assert {str(r.id) for r in listed} == set(ids)
        store.delete(ids[0])
        assert store.get(ids[0]) is None
        assert pg_query(pg_dsn, f"SELECT count(*) FROM {TABLE}") == [(2,)]
        # An existing table is left as it is.
        assert not pgfacts.create_table(store.connection_pool, TABLE, DIMS, PARTITIONS)
    finally:
        store.connection_pool.close()


def test_an_existing_single_table_keeps_its_layout(store: Any, pg_dsn: str) -> None:
    kind = pg_query(pg_dsn, "SELECT relkind FROM pg_class WHERE relname = %s", [TABLE])
    assert not pgfacts.create_table(store.connection_pool, TABLE, DIMS, PARTITIONS)
    assert pg_query(pg_dsn, "SELECT relkind FROM pg_class WHERE relname = %s", [TABLE]) == kind


def test_facts_are_deleted_by_id_within_their_principal(store: Any, pg_dsn: str) -> None:
    rows = _rows(random.Random(11))[:30]
    rows.append((str(uuid.uuid4()), [0.5] * DIMS, {"data": "nobody's", "kaos_group": "g"}))
    _load(pg_dsn, rows)
    doomed = [(i, p) for i, _, p in rows[:10]] + [(rows[-1][0], rows[-1][2])]
    # A payload naming another principal than the row's deletes nothing of that row.
    forged = (rows[10][0], {**rows[10][2], "user_id": "mallory"})
    assert pgfacts.delete(store.connection_pool, TABLE, [*doomed, forged]) == len(doomed)
    left = {str(r[0]) for r in pg_query(pg_dsn, f"SELECT id FROM {TABLE}")}
    assert left == {i for i, _, _ in rows[10:-1]}
    # Again: the rows are gone, nothing else goes.
    assert pgfacts.delete(store.connection_pool, TABLE, doomed) == 0
    assert pg_query(pg_dsn, f"SELECT count(*) FROM {TABLE}") == [(len(rows) - len(doomed),)]
