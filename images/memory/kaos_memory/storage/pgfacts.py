"""The two queries KAOS runs itself on Mem0's pgvector table (external mode), and the
indexes that serve them.

Mem0 stores a fact as ``(id uuid, vector, payload jsonb)`` and filters with
``payload->>%s = %s``: the key is a bind parameter, so no expression index can serve
the filter, and once psycopg prepares the statement (from its fifth run) PostgreSQL's
generic plan cannot even see which key it is. Measured at 100k facts over 100
principals: a principal's search scanned the whole table (100 ms) and grew with
everything every tenant stored. Here the keys are SQL literals (KAOS's own constants;
only the values are parameters), and the tenant keys have expression indexes, so the
planner reads the tenant's rows through the index (a bitmap scan, then the exact
distance of those rows: 5 ms at 100k) or walks the HNSW index when that is cheaper.

Listing orders by ``(created_at, id)`` in the query and continues after the cursor,
with a ``LIMIT``: a page reads the scope's rows through the same indexes and sorts them
in the database (a top-N sort), instead of fetching the whole scope into Python for
every page.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql

from kaos_memory.storage.longterm import TENANT_KEYS, WILDCARD

Row = tuple[str, float, dict[str, Any]]


def _where(filters: dict[str, str]) -> tuple[sql.Composable, list[Any]]:
    conditions: list[sql.Composable] = []
    params: list[Any] = []
    for key, value in filters.items():
        if value == WILDCARD:
            conditions.append(sql.SQL("payload ? {}").format(sql.Literal(key)))
        else:
            conditions.append(sql.SQL("payload->>{} = %s").format(sql.Literal(key)))
            params.append(value)
    if not conditions:
        return sql.SQL("TRUE"), params
    return sql.SQL(" AND ").join(conditions), params


def ensure_indexes(pool: Any, table: str) -> None:
    """Expression indexes on the tenant keys of ``table`` (idempotent)."""
    with pool.connection() as conn:
        for key in TENANT_KEYS:
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ((payload->>{}))").format(
                    sql.Identifier(f"{table}_kaos_{key}_idx"),
                    sql.Identifier(table),
                    sql.Literal(key),
                )
            )


def search_query(
    table: str, vector: list[float], filters: dict[str, str], limit: int
) -> tuple[sql.Composed, list[Any]]:
    """The statement and parameters of ``search`` (also what the benchmark explains)."""
    where, params = _where(filters)
    query = sql.SQL(
        "SELECT id, vector <=> %s::vector AS distance, payload FROM {} WHERE {}"
        " ORDER BY distance LIMIT %s"
    ).format(sql.Identifier(table), where)
    return query, [vector, *params, limit]


def search(
    pool: Any, table: str, vector: list[float], filters: dict[str, str], limit: int
) -> list[Row]:
    """The ``limit`` nearest facts inside ``filters``: ``(id, 1 - cosine distance, payload)``."""
    query, params = search_query(table, vector, filters, limit)
    with pool.connection() as conn:
        rows = conn.execute(query, params).fetchall()
    return [(str(r[0]), max(0.0, 1.0 - float(r[1])), r[2]) for r in rows]


_ORDER = sql.SQL("""coalesce(payload->>'created_at', '') COLLATE "C", id::text COLLATE "C" """)


def page(
    pool: Any, table: str, filters: dict[str, str], limit: int, after: tuple[str, str] | None
) -> list[tuple[str, dict[str, Any]]]:
    """Up to ``limit`` facts inside ``filters`` in ``(created_at, id)`` order, after ``after``."""
    where, params = _where(filters)
    if after is not None:
        where = sql.SQL("{} AND ({}) > (%s, %s)").format(where, _ORDER)
        params += [after[0], after[1]]
    query = sql.SQL("SELECT id, payload FROM {} WHERE {} ORDER BY {} LIMIT %s").format(
        sql.Identifier(table), where, _ORDER
    )
    with pool.connection() as conn:
        rows = conn.execute(query, (*params, limit)).fetchall()
    return [(str(r[0]), r[1]) for r in rows]
