"""KAOS's tenant-filtered queries (``kaos_memory.storage.pgfacts``) on the table Mem0's own
pgvector store creates (HNSW index included), on a real PostgreSQL: a principal's search
is exact (the ``limit`` nearest of its facts, never an HNSW index's first candidates),
and a principal's page is read in order through its index."""

from __future__ import annotations

import json
import math
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kaos_memory.storage import pgfacts
from psycopg import sql

from tests.support.postgres import connect, generic_plan, mem0_pgvector, pg_query

pytestmark = pytest.mark.postgres

TABLE = "kaos_facts"
DIMS = 8
PRINCIPALS = ("alice", "bob", "carol")
AGENTS = ("planner", "coder")
PER_PRINCIPAL = 1000
# More than hnsw.ef_search (40): an HNSW scan without iterative scanning hands the
# filter at most 40 candidates, so it could not return this many of one principal.
LIMIT = 60


@pytest.fixture
def store(pg_dsn: str) -> Iterator[Any]:
    s = mem0_pgvector(pg_dsn, TABLE, DIMS)
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
    with connect(dsn) as conn, conn.cursor() as cur:
        cur.executemany(
            sql.SQL("INSERT INTO {} (id, vector, payload) VALUES (%s, %s::vector, %s)").format(
                sql.Identifier(TABLE)
            ),
            [(i, str(v), json.dumps(p)) for i, v, p in rows],
        )
    pg_query(dsn, f"VACUUM ANALYZE {TABLE}")


def _cosine_distance(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return 1 - dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def _generic_plan(pool: Any, query: sql.Composed, params: list[Any]) -> str:
    """The plan a pooled connection runs once psycopg has prepared the statement."""
    with pool.connection() as conn:
        return "\n".join(generic_plan(conn, query, params))


def test_indexes_are_created_once_and_again_without_error(store: Any, pg_dsn: str) -> None:
    pgfacts.ensure_indexes(store.connection_pool, TABLE)
    pgfacts.ensure_indexes(store.connection_pool, TABLE)  # a restart, or a second replica
    found = {
        r[0]: r[1]
        for r in pg_query(
            pg_dsn, "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [TABLE]
        )
    }
    for name in ("user_id", "agent_id", "run_id", "agent_user", "user_order"):
        assert f"{TABLE}_kaos_{name}_idx" in found, found
    assert "created_at" in found[f"{TABLE}_kaos_user_order_idx"]


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
        hits = pgfacts.search(pool, TABLE, query, filters, LIMIT)
        assert [h[0] for h in hits] == expected
    assert all(h[2]["user_id"] == "bob" for h in hits)
    scores = [h[1] for h in hits]
    assert scores == sorted(scores, reverse=True)
    by_id = dict(mine)
    assert all(abs(h[1] - (1 - by_id[h[0]])) < 1e-5 for h in hits)
    plan = _generic_plan(pool, *pgfacts.search_query(TABLE, query, filters, LIMIT))
    assert "hnsw" not in plan, plan
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
    assert f"{TABLE}_kaos_user_order_idx" in plan, plan
    assert "Sort" not in plan, plan
