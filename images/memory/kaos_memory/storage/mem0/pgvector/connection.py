"""PostgreSQL connection set-up for the pgvector backend: Mem0's DSN and the search pool's
connections."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from pgvector.psycopg import register_vector_async
from psycopg.conninfo import conninfo_to_dict, make_conninfo


def pgvector_dsn(dsn: str) -> str:
    """``dsn`` with pgvector's HNSW iterative scans on (pgvector >= 0.8).

    Without it a selective tenant filter returns fewer rows than asked, because the
    index scan stops before enough rows pass the filter. A DSN that already sets
    ``options`` is left alone: the operator chose them.
    """
    params = conninfo_to_dict(dsn)
    if "options" in params:
        return dsn
    option = "-c hnsw.iterative_scan=relaxed_order"
    if dsn.startswith(("postgresql://", "postgres://")):
        sep = "&" if "?" in dsn else "?"
        return f"{dsn}{sep}options={quote(option)}"
    return make_conninfo(dsn, options=option)


async def search_connection(conn: Any) -> None:
    """A search pool's connection: binary vectors, and plans for each search's values.

    The query vector goes as pgvector's binary ``vector`` (numpy float32, pgvector's
    adapter) rather than a list of floats PostgreSQL parses and casts: less client CPU a
    search, and less parsing in the server.

    Each search is planned for its own values, also once psycopg prepared the statement
    (from its fifth run). A prepared statement's generic plan leaves the principal's
    partition to be chosen when it runs, and PostgreSQL 15 then locks every partition and
    each of their indexes first, at each execution; a plan made for the values names one
    partition and locks only it. Planning a search costs less than those locks (the
    figures: docs/benchmarks.md, "Measured figures behind the design")."""
    await register_vector_async(conn)
    await conn.execute("SET plan_cache_mode = force_custom_plan")
