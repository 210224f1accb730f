"""The PostgreSQL fixtures: each test gets its own database, and pgvector works in it."""

from __future__ import annotations

import math

import psycopg
import pytest

from tests.fixtures.postgres import MakeDatabase
from tests.support.postgres import TEST_DB_PREFIX, connect, pg_query

pytestmark = pytest.mark.postgres

QUERY = "[1,0,0]"
# Cosine distance to QUERY is 1 - cos(angle): it ignores length, so "scaled" ties with "same".
ROWS = [
    ("diagonal", "[1,1,0]", 1 - 1 / math.sqrt(2)),
    ("opposite", "[-1,0,0]", 2.0),
    ("orthogonal", "[0,1,0]", 1.0),
    ("same", "[1,0,0]", 0.0),
    ("scaled", "[3,0,0]", 0.0),
]
EXPECTED = sorted(((name, distance) for name, _, distance in ROWS), key=lambda r: (r[1], r[0]))


def _load_items(dsn: str) -> None:
    pg_query(dsn, "CREATE TABLE items (name text PRIMARY KEY, embedding vector(3) NOT NULL)")
    placeholders = ", ".join(["(%s, %s::vector)"] * len(ROWS))
    params = [value for name, vector, _ in ROWS for value in (name, vector)]
    pg_query(dsn, f"INSERT INTO items (name, embedding) VALUES {placeholders}", params)


def _nearest(dsn: str) -> list[tuple[str, float]]:
    rows = pg_query(
        dsn,
        "SELECT name, embedding <=> %s::vector AS distance FROM items"
        " ORDER BY embedding <=> %s::vector, name",
        [QUERY, QUERY],
    )
    return [(name, distance) for name, distance in rows]


def _assert_nearest(actual: list[tuple[str, float]]) -> None:
    assert [name for name, _ in actual] == [name for name, _ in EXPECTED]
    # Vectors are stored as float4, hence the tolerance.
    assert [d for _, d in actual] == pytest.approx([d for _, d in EXPECTED], abs=1e-6)


def test_creates_vector_extension_and_orders_by_cosine_distance(pg_bare_dsn: str) -> None:
    assert pg_query(pg_bare_dsn, "SELECT 1 FROM pg_extension WHERE extname = 'vector'") == []
    pg_query(pg_bare_dsn, "CREATE EXTENSION IF NOT EXISTS vector")
    [(version,)] = pg_query(
        pg_bare_dsn, "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
    )
    assert tuple(int(part) for part in version.split(".")[:2]) >= (0, 5)

    _load_items(pg_bare_dsn)
    _assert_nearest(_nearest(pg_bare_dsn))


def test_hnsw_cosine_index_is_used_and_agrees(pg_dsn: str) -> None:
    # The index code is the compiled part of pgvector, so exercise it, not only the operator.
    _load_items(pg_dsn)
    pg_query(
        pg_dsn, "CREATE INDEX items_embedding ON items USING hnsw (embedding vector_cosine_ops)"
    )
    with connect(pg_dsn) as conn:
        # Same session: the setting must apply to the EXPLAIN and the query that follow.
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                "EXPLAIN SELECT name FROM items ORDER BY embedding <=> %s::vector LIMIT 5",
                [QUERY],
            )
        )
        assert "Index Scan using items_embedding" in plan
        found = conn.execute(
            "SELECT name FROM items ORDER BY embedding <=> %s::vector LIMIT 5", [QUERY]
        ).fetchall()
    # The index returns all five (ties in any order); the distances are checked above.
    assert sorted(name for (name,) in found) == sorted(name for name, _ in EXPECTED)
    assert found[-1] == ("opposite",)


def test_pg_dsn_has_vector_and_its_own_database(pg_dsn: str) -> None:
    [(database, has_vector)] = pg_query(
        pg_dsn,
        "SELECT current_database(), EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
    )
    assert database.startswith(TEST_DB_PREFIX)
    assert has_vector


def test_databases_are_isolated(pg_make_database: MakeDatabase) -> None:
    first, second = pg_make_database(), pg_make_database()
    assert first != second
    pg_query(first, "CREATE TABLE only_in_first (id int)")
    pg_query(first, "INSERT INTO only_in_first VALUES (1)")

    assert pg_query(first, "SELECT count(*) FROM only_in_first") == [(1,)]
    assert pg_query(second, "SELECT to_regclass('only_in_first')") == [(None,)]


async def test_async_driver_reaches_the_database(pg_dsn: str) -> None:
    # The memory service uses psycopg's async API: the DSN must serve it as well.
    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute("SELECT '[1,2,3]'::vector <-> '[1,2,4]'::vector")
        assert await cur.fetchone() == (1.0,)
