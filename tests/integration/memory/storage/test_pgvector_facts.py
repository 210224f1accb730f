"""KAOS's own queries on Mem0's pgvector table (``storage.mem0.pgvector.facts``), on a real
PostgreSQL: tenant-filtered search and ordered pages, and the indexes that serve them."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kaos_memory.storage.mem0.pgvector import facts as pgfacts
from psycopg_pool import ConnectionPool

from tests.support.postgres import connect, generic_plan, pg_query
from tests.support.storage import pg_search

pytestmark = pytest.mark.postgres

TABLE = "facts"


@pytest.fixture
def pool(pg_dsn: str) -> Iterator[ConnectionPool]:
    # The layout Mem0's pgvector store creates.
    pg_query(pg_dsn, f"CREATE TABLE {TABLE} (id UUID PRIMARY KEY, vector vector(3), payload JSONB)")
    with ConnectionPool(pg_dsn, min_size=1, max_size=2, open=True) as p:
        yield p


def insert(dsn: str, rows: list[tuple[list[float], dict[str, Any]]]) -> list[str]:
    ids = [str(uuid.uuid4()) for _ in rows]
    with connect(dsn) as conn, conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO {TABLE} (id, vector, payload) VALUES (%s, %s::vector, %s::jsonb)",
            [(i, str(v), json.dumps(p)) for i, (v, p) in zip(ids, rows, strict=True)],
        )
    return ids


def test_search_keeps_to_the_filter_and_orders_by_distance(
    pool: ConnectionPool, pg_dsn: str
) -> None:
    pgfacts.ensure_indexes(pool, TABLE)
    pgfacts.ensure_indexes(pool, TABLE)  # idempotent
    indexes = {
        r[0]
        for r in pg_query(pg_dsn, "SELECT indexname FROM pg_indexes WHERE tablename = %s", [TABLE])
    }
    assert {f"{TABLE}_kaos_{k}_group_idx" for k in ("user_id", "agent_id", "run_id")} <= indexes
    near, far, other = insert(
        pg_dsn,
        [
            ([1, 0, 0], {"data": "near", "user_id": "alice", "run_id": "s1"}),
            ([0, 1, 0], {"data": "far", "user_id": "alice", "run_id": "s2"}),
            ([1, 0, 0], {"data": "bob's", "user_id": "bob", "run_id": "s1"}),
        ],
    )
    hits = pg_search(pool, TABLE, [1.0, 0.1, 0.0], {"user_id": "alice"}, 10)
    assert [h[0] for h in hits] == [near, far]
    assert hits[0][1] > hits[1][1] and hits[0][2]["data"] == "near"
    assert [h[0] for h in pg_search(pool, TABLE, [1.0, 0.0, 0.0], {"user_id": "alice"}, 1)] == [
        near
    ]
    # The wildcard means "key present", as in Mem0's pgvector filters.
    every = pg_search(pool, TABLE, [1.0, 0.0, 0.0], {"run_id": "*"}, 10)
    assert {h[0] for h in every} == {near, far, other}
    # A value that looks like SQL is only ever a parameter.
    assert pg_search(pool, TABLE, [1.0, 0.0, 0.0], {"user_id": "x' OR '1'='1"}, 10) == []


def test_pages_follow_the_cursor_in_order_without_gaps(pool: ConnectionPool, pg_dsn: str) -> None:
    rows: list[tuple[list[float], dict[str, Any]]] = []
    for i in range(23):
        # Several facts share a timestamp: the id breaks the tie.
        rows.append(
            (
                [1, 0, 0],
                {
                    "data": f"a{i}",
                    "user_id": "alice",
                    "created_at": f"2026-01-01T00:00:{i // 3:02d}",
                },
            )
        )
        rows.append(
            ([1, 0, 0], {"data": f"b{i}", "user_id": "bob", "created_at": "2026-01-01T00:00:00"})
        )
    insert(pg_dsn, rows)
    seen: list[tuple[str, str]] = []
    after = None
    while True:
        page = pgfacts.page(pool, TABLE, {"user_id": "alice"}, 10, after)
        seen += [(p["created_at"], i) for i, p in page]
        if len(page) < 10:
            break
        after = seen[-1]
    assert len(seen) == 23 and len(set(seen)) == 23
    assert seen == sorted(seen)


def test_a_tenant_search_reads_the_tenant_through_its_index(
    pool: ConnectionPool, pg_dsn: str
) -> None:
    pgfacts.ensure_indexes(pool, TABLE)
    insert(
        pg_dsn,
        [
            ([i % 7, i % 5, 1], {"data": str(i), "user_id": f"user{i % 100}", "run_id": "s"})
            for i in range(5000)
        ],
    )
    pg_query(pg_dsn, f"ANALYZE {TABLE}")
    query, params = pgfacts.search_query(
        TABLE, [1.0, 0.0, 0.0], {"user_id": "user7", "run_id": "*"}, 10
    )
    with pool.connection() as conn:
        plan = "\n".join(generic_plan(conn, query, params))
    assert f"{TABLE}_kaos_user_id_group_idx" in plan, plan
    assert "Seq Scan" not in plan, plan
