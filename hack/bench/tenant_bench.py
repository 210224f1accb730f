"""Tenant-bound cost in external mode: search and listing of one principal as the store grows.

For each size N (facts spread over 100 principals x 20 agents, random 64-dimensional
vectors, in a table created by Mem0's own pgvector store with its HNSW index), one
process measures side by side:

- search: KAOS's tenant-filtered query (``kaos_memory.storage.pgfacts.search``: literal
  keys, expression indexes on the tenant keys) vs. Mem0's ``PGVector.search`` with the
  same filter (``payload->>%s = %s``), p50 over one principal at a time, the pool KAOS
  asks for (60 facts);
- listing: a 100-fact page of one principal in ``(created_at, id)`` order (``pgfacts.page``)
  vs. what listing did before (every row of the scope through ``PGVector.list``, sorted in
  Python), p50 per page;
- the plans PostgreSQL chooses for both searches (prepared, generic plan: what a
  connection pool runs after a statement's fifth execution).

A principal's facts are N/100: the KAOS figures should follow them, not N.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import Any

from benchlib import percentile
from kaos_memory.storage import pgfacts
from psycopg import sql

from tests.support.postgres import connect, create_database, drop_database, unique_name

TABLE = "kaos_tenant_bench"
DIMS = 64
PRINCIPALS = [f"user{i}" for i in range(100)]
AGENTS = [f"agent{i}" for i in range(20)]
POOL = 60
PAGE = 100


def _store(dsn: str) -> Any:
    from mem0.vector_stores.pgvector import PGVector

    return PGVector(
        dbname=None,
        collection_name=TABLE,
        embedding_model_dims=DIMS,
        user=None,
        password=None,
        host=None,
        port=None,
        diskann=False,
        hnsw=True,
        connection_string=dsn,
    )


def _load(dsn: str, count: int, rng: random.Random) -> None:
    """Bulk rows shaped as KAOS stores them; the HNSW index is rebuilt after the load."""
    with connect(dsn) as conn:
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(f"{TABLE}_hnsw_idx")))
        with conn.cursor() as cur:
            batch = []
            for i in range(count):
                principal, agent = rng.choice(PRINCIPALS), rng.choice(AGENTS)
                payload = {
                    "data": f"fact {i}",
                    "user_id": principal,
                    "agent_id": agent,
                    "run_id": f"s{rng.randrange(1000)}",
                    "kaos_group": "bench",
                    "created_at": f"2026-01-01T00:00:00.{i:06d}",
                }
                vec = "[" + ",".join(f"{rng.random():.4f}" for _ in range(DIMS)) + "]"
                batch.append((str(uuid.uuid4()), vec, json.dumps(payload)))
                if len(batch) == 5000 or i == count - 1:
                    cur.executemany(
                        sql.SQL(
                            "INSERT INTO {} (id, vector, payload) VALUES (%s, %s::vector, %s)"
                        ).format(sql.Identifier(TABLE)),
                        batch,
                    )
                    batch = []
        conn.execute(
            sql.SQL("CREATE INDEX {} ON {} USING hnsw (vector vector_cosine_ops)").format(
                sql.Identifier(f"{TABLE}_hnsw_idx"), sql.Identifier(TABLE)
            )
        )
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(TABLE)))


def generic_plan(conn: Any, query: Any, params: list[Any]) -> list[str]:
    """``EXPLAIN ANALYZE`` of ``query`` as a prepared statement under its generic plan, the
    plan a pooled connection settles on after a statement's fifth execution (an
    ``EXPLAIN`` with bound parameters would show a custom plan instead)."""
    text = query.as_string(conn)
    for n in range(1, len(params) + 1):
        text = text.replace("%s", f"${n}", 1)
    conn.execute(f"PREPARE kaos_plan_probe AS {text}")
    try:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        # Literal arguments: EXECUTE's own parameters would have no type to infer.
        args = sql.SQL(", ").join(sql.Literal(str(p) if isinstance(p, list) else p) for p in params)
        explain = sql.SQL("EXPLAIN (ANALYZE, COSTS OFF) EXECUTE kaos_plan_probe({})")
        rows = conn.execute(explain.format(args)).fetchall()
    finally:
        conn.execute("RESET plan_cache_mode")
        conn.execute("DEALLOCATE kaos_plan_probe")
    return [r[0] for r in rows]


def _plan(pool: Any, query: Any, params: list[Any]) -> str:
    """The generic plan's nodes on one line."""
    with pool.connection() as conn:
        lines = generic_plan(conn, query, params)
    # The plan's nodes, outermost first, without their details; then the execution time.
    nodes = [ln.strip().removeprefix("->").strip().split(" (")[0] for ln in lines]
    nodes = [n for n in nodes if ":" not in n and (n.split(" ")[0] in PLAN_NODES or " Scan" in n)]
    timing = next((ln for ln in lines if ln.startswith("Execution Time")), "")
    return " > ".join(nodes) + f" [{timing}]"


PLAN_NODES = {"Limit", "Sort", "Gather", "Gather Merge", "Incremental", "BitmapAnd", "BitmapOr"}


def _mem0_query(vector: list[float], filters: dict[str, str]) -> tuple[Any, list[Any]]:
    """The statement ``PGVector.search`` runs (mem0 2.2.1), for its plan."""
    conds = " AND ".join("payload->>%s = %s" for _ in filters)
    params: list[Any] = [vector]
    for key, value in filters.items():
        params += [key, value]
    query = sql.SQL(
        "SELECT id, vector <=> %s::vector AS distance, payload FROM {} WHERE "
        + conds
        + " ORDER BY distance LIMIT %s"
    ).format(sql.Identifier(TABLE))
    return query, [*params, POOL]


def run(admin_dsn: str, sizes: list[int], ops: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        rng = random.Random(size)
        name = unique_name("kaos_tenant_")
        dsn = create_database(admin_dsn, name)
        try:
            with connect(dsn) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            store = _store(dsn)
            store._ensure_collection()
            started = time.perf_counter()
            _load(dsn, size, rng)
            print(f"[tenant {size}] loaded in {time.perf_counter() - started:.1f}s", flush=True)
            # Before: Mem0's table as Mem0 creates it (HNSW and text indexes only).
            before = _mem0_search(store, rng, ops)
            pgfacts.ensure_indexes(store.connection_pool, TABLE)
            with connect(dsn) as conn:
                conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(TABLE)))
            rows.append({**_measure(store, size, rng, ops), "mem0_search_before": before})
        finally:
            pool = getattr(locals().get("store"), "connection_pool", None)
            if pool is not None:
                pool.close()
            drop_database(admin_dsn, name)
    return rows


def _filt(i: int) -> dict[str, str]:
    return {"kaos_group": "bench", "user_id": PRINCIPALS[i % len(PRINCIPALS)]}


def _vec(rng: random.Random) -> list[float]:
    return [rng.random() for _ in range(DIMS)]


def _timed(fn: Any, ops: int) -> float:
    """p50 ms of ``fn(i)`` over ``ops`` calls, after five warm-up calls."""
    for i in range(5):
        fn(i)
    lat = []
    for i in range(ops):
        t0 = time.perf_counter()
        fn(i)
        lat.append(time.perf_counter() - t0)
    return float(percentile(lat, 0.5) * 1000)


def _mem0_search(store: Any, rng: random.Random, ops: int) -> float:
    """p50 ms of Mem0's own ``PGVector.search`` of one principal."""
    return _timed(
        lambda i: store.search(query="", vectors=_vec(rng), top_k=POOL, filters=_filt(i)), ops
    )


def _measure(store: Any, size: int, rng: random.Random, ops: int) -> dict[str, Any]:
    pool = store.connection_pool
    filt = _filt

    def vec() -> list[float]:
        return _vec(rng)

    def timed(fn: Any) -> float:
        return _timed(fn, ops)

    kaos_search = timed(lambda i: pgfacts.search(pool, TABLE, vec(), filt(i), POOL))
    mem0_search = timed(
        lambda i: store.search(query="", vectors=vec(), top_k=POOL, filters=filt(i))
    )

    def old_page(i: int) -> None:
        listed = store.list(filters=filt(i), top_k=1_000_000)[0]
        sorted(listed, key=lambda r: (r.payload.get("created_at", ""), str(r.id)))[:PAGE]

    kaos_page = timed(
        lambda i: pgfacts.page(pool, TABLE, filt(i), PAGE, ("2026-01-01T00:00:00.000000", ""))
    )
    old = timed(old_page)
    v = vec()
    kq, kp = pgfacts.search_query(TABLE, v, filt(7), POOL)
    mq, mp = _mem0_query(v, filt(7))
    return {
        "facts": size,
        "per_principal": size // len(PRINCIPALS),
        "kaos_search": kaos_search,
        "mem0_search": mem0_search,
        "kaos_page": kaos_page,
        "old_page": old,
        "kaos_plan": _plan(pool, kq, kp),
        "mem0_plan": _plan(pool, mq, mp),
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'facts':>8}{'/principal':>11}{'search kaos':>13}{'mem0 before':>13}{'mem0 after':>12}"
        f"{'before/kaos':>12}{'page kaos':>11}{'page before':>13}{'ratio':>7}"
    )
    print(
        "external mode, one principal's search (60 nearest) and a 100-fact page, p50 ms;"
        " mem0 before/after: Mem0's own search without/with KAOS's tenant indexes"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        search = r["mem0_search_before"] / r["kaos_search"]
        page = r["old_page"] / r["kaos_page"]
        print(
            f"{r['facts']:>8}{r['per_principal']:>11}{r['kaos_search']:>13.2f}"
            f"{r['mem0_search_before']:>13.2f}{r['mem0_search']:>12.2f}{search:>12.1f}"
            f"{r['kaos_page']:>11.2f}{r['old_page']:>13.2f}{page:>7.1f}"
        )
    for r in rows:
        print(f"plan at {r['facts']} facts, KAOS: {r['kaos_plan']}")
        print(f"plan at {r['facts']} facts, Mem0: {r['mem0_plan']}")
