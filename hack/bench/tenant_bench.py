"""Tenant-bound cost in external mode: search and listing of one principal as the store grows.

For each size N (facts spread over 100 principals x 20 agents, random 64-dimensional
vectors, in a table created by Mem0's own pgvector store with its HNSW index), one
process measures side by side:

- search: KAOS's tenant-filtered query (``storage.mem0.pgvector.facts.search_query``: literal
  keys, expression indexes on the tenant keys) vs. Mem0's ``PGVector.search`` with the
  same filter (``payload->>%s = %s``), p50 over one principal at a time, the pool KAOS
  asks for (60 facts);
- listing: a 100-fact page of one principal in ``(created_at, id)`` order (``pgfacts.page``)
  vs. what listing did before (every row of the scope through ``PGVector.list``, sorted in
  Python), p50 per page;
- the search of one agent's facts of that principal (agent-level recall filters both);
- the plans PostgreSQL chooses for the searches (prepared, generic plan: what a
  connection pool runs after a statement's fifth execution).

A principal's facts are N/100: the KAOS figures should follow them, not N. Rows are
loaded with binary COPY and Mem0's HNSW index is built once after the load (in memory,
with parallel workers), so 1M facts load in seconds and index in minutes; the times are
printed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import re
import shutil
import struct
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from benchlib import memory_service, percentile, until_metrics
from kaos_devmodel import embeddings
from kaos_memory.storage.mem0.pgvector import facts as pgfacts
from psycopg import sql

from tests.support.postgres import (
    connect,
    create_database,
    drop_database,
    generic_plan,
    mem0_pgvector,
    unique_name,
)
from tests.support.storage import pg_search

TABLE = "kaos_tenant_bench"
DIMS = 64
PRINCIPALS = [f"user{i}" for i in range(100)]
AGENTS = [f"kaos://agent/bench/agent{i}" for i in range(20)]
POOL = 60
PAGE = 100


# Facts are sentences of words drawn from a vocabulary with Zipf's law (as words in text
# are), embedded as the development model embeds them (a hashed bag of words), so the
# queries the service embeds meet facts of the same kind; uniform random vectors, the
# hardest case for an approximate index, would resemble no embedding.
VOCABULARY = 5000
WORDS_PER_FACT = 10


def _word(n: int) -> str:
    return f"w{n}"


def _sentences(count: int, rng: random.Random) -> tuple[list[str], Any]:
    """``count`` sentences and their unit vectors (``kaos_devmodel.embeddings``)."""
    np_rng = np.random.default_rng(rng.randrange(2**32))
    words = (np_rng.zipf(1.2, size=(count, WORDS_PER_FACT)) - 1) % VOCABULARY
    slots = [embeddings._slot(_word(n), DIMS) for n in range(VOCABULARY)]
    index = np.array([slot for slot, _ in slots])
    sign = np.array([sign for _, sign in slots], dtype=np.float32)
    vectors = np.zeros((count, DIMS), dtype=np.float32)
    rows = np.repeat(np.arange(count), WORDS_PER_FACT)
    np.add.at(vectors, (rows, index[words].ravel()), sign[words].ravel())
    norms = np.linalg.norm(vectors, axis=1)
    vectors[norms == 0, 0] = 1.0  # as the model does for a text whose signs cancel out
    vectors /= np.maximum(norms, 1e-12)[:, None]
    texts = [" ".join(_word(n) for n in row) for row in words.tolist()]
    return texts, vectors


def _query(rng: random.Random) -> str:
    return " ".join(_word(int(rng.paretovariate(0.2)) % VOCABULARY) for _ in range(6))


def _copy_rows(count: int, rng: random.Random) -> Iterator[bytes]:
    """``count`` rows shaped as KAOS stores them, in COPY's binary format (uuid, vector, jsonb):
    formatting a million vectors as text would take longer than loading them."""
    texts, vectors = _sentences(count, rng)
    # pgvector's binary form: dimensions (int16), an unused int16, then big-endian float4s.
    vec_head = struct.pack("!ihh", 4 + 4 * DIMS, DIMS, 0)
    big_endian = vectors.astype(">f4")
    yield b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
    chunk: list[bytes] = []
    for i in range(count):
        principal, agent = rng.choice(PRINCIPALS), rng.choice(AGENTS)
        payload = json.dumps(
            {
                "data": texts[i],
                "user_id": principal,
                "agent_id": agent,
                "run_id": f"s{rng.randrange(1000)}",
                "kaos_group": TABLE,
                "created_at": f"2026-01-01T00:00:00.{i:06d}",
            }
        ).encode()
        chunk.append(
            struct.pack("!hi", 3, 16)
            + uuid.UUID(int=rng.getrandbits(128), version=4).bytes
            + vec_head
            + big_endian[i].tobytes()
            + struct.pack("!ib", len(payload) + 1, 1)  # jsonb's binary form: version 1
            + payload
        )
        if len(chunk) == 10_000:
            yield b"".join(chunk)
            chunk = []
    yield b"".join(chunk) + struct.pack("!h", -1)


def _load(dsn: str, count: int, rng: random.Random) -> tuple[float, float]:
    """Bulk rows shaped as KAOS stores them (COPY), then Mem0's HNSW index built once over
    all of them: seconds spent loading and building."""
    started = time.perf_counter()
    hnsw = sql.Identifier(f"{TABLE}_hnsw_idx")
    with connect(dsn) as conn:
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(hnsw))
        with conn.cursor() as cur:
            copy = sql.SQL("COPY {} (id, vector, payload) FROM STDIN (FORMAT BINARY)")
            with cur.copy(copy.format(sql.Identifier(TABLE))) as out:
                for data in _copy_rows(count, rng):
                    out.write(data)
        loaded = time.perf_counter()
        # The graph of a million 64-dimensional vectors fits in 1 GB: built in memory, in
        # parallel, it takes minutes instead of the tens of minutes of an on-disk build.
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        conn.execute(
            sql.SQL("CREATE INDEX {} ON {} USING hnsw (vector vector_cosine_ops)").format(
                hnsw, sql.Identifier(TABLE)
            )
        )
        # VACUUM sets the visibility map (what autovacuum does to a table that receives
        # inserts), ANALYZE the statistics the planner uses.
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(TABLE)))
    return loaded - started, time.perf_counter() - loaded


def _plan(pool: Any, query: Any, params: list[Any]) -> str:
    """The generic plan's nodes on one line."""
    with pool.connection() as conn:
        lines = generic_plan(conn, query, params, analyze=True)
    # The plan's nodes, outermost first, without their details; then the execution time.
    nodes = [ln.strip().removeprefix("->").strip().split(" (")[0] for ln in lines]
    nodes = [n for n in nodes if ":" not in n and (n.split(" ")[0] in PLAN_NODES or " Scan" in n)]

    # One node per kind of partition scan, with how many partitions it scanned.
    def kind(node: str) -> str:
        node = re.sub(rf"\b{TABLE}_p\d+(\S*) {TABLE}_\d+", rf"{TABLE}_p*\1", node)
        return re.sub(rf"\b{TABLE}_p\d+_", f"{TABLE}_p*_", node)  # a partition's index

    runs = [list(run) for _, run in itertools.groupby(nodes, key=kind)]
    nodes = [run[0] if len(run) == 1 else f"{kind(run[0])} x{len(run)}" for run in runs]
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


def _service_recalls(dsn: str, base_url: str, ops: int) -> dict[str, float]:
    """p50 ms of a principal's recall through ``kaos-memory`` on the loaded table: the
    principal's facts (user level) and one agent's facts of the principal (agent level),
    every tier, as an agent asks (the query embedded by the development model). Measured
    once the service has loaded the vectors of the principals it holds (a principal with
    1,000 facts or more is searched from them, ``kaos_memory.storage.mem0.pgvector.cache``)."""
    root = Path(tempfile.mkdtemp(prefix="kaos-tenant-bench-"))
    env = {
        "KAOS_MEMORY_STORAGE": "external",
        "KAOS_MEMORY_DATA_DIR": str(root / "data"),
        "KAOS_MEMORY_DSN": dsn,
        "KAOS_MEMORY_COLLECTION": TABLE,
        "KAOS_MEMORY_MODEL_BASE_URL": base_url,
        "KAOS_MEMORY_EMBEDDING_DIMS": str(DIMS),
        # A principal's recall of all its facts is a user-level read.
        "KAOS_MEMORY_MAX_READ_SCOPE": "user",
        # Room for every principal's vectors (1M x 64 float32 and ids: 273 MB).
        "KAOS_MEMORY_VECTOR_CACHE_MB": str(VECTOR_CACHE_MB),
    }
    svc = memory_service("tenant", env, root)
    try:
        return asyncio.run(_recalls(svc.url, ops))
    finally:
        svc.stop(timeout=60)
        shutil.rmtree(root, ignore_errors=True)


async def _recalls(url: str, ops: int) -> dict[str, float]:
    rng = random.Random(ops)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as http:

        async def recall(level: str, i: int) -> int:
            headers = {
                "X-Agent-Identity": AGENTS[i % len(AGENTS)],
                "X-Principal": PRINCIPALS[i % len(PRINCIPALS)],
                # One principal's and one agent's: 100 principals, 20 agents.
                "X-Session-Id": f"tenant-session-{i % len(PRINCIPALS)}",
            }
            body = {"level": level, "query": _query(rng), "top_k": 10}
            async with http.post(f"{url}/v1/recall", json=body, headers=headers) as resp:
                doc = await resp.json()
                assert resp.status == 200, doc
                # A degraded answer (the search missed its deadline) would time nothing.
                assert not doc["degraded"], doc
                return len(doc["long_term"]["facts"])

        result: dict[str, float] = {}
        for level in ("user", "agent"):
            for i in range(WARM_UP):
                await recall(level, i)
            # The steady state: the principals large enough are held by now.
            samples = await until_metrics(
                http,
                url,
                lambda m: (
                    m.get("kaos_memory_vector_loads") == 0 and "kaos_memory_held_principals" in m
                ),
                "the principals' vectors still loading",
            )
            result["held"] = samples["kaos_memory_held_principals"]
            lat = []
            for i in range(ops):
                started = time.perf_counter()
                found = await recall(level, i)
                lat.append(time.perf_counter() - started)
            result[f"svc_{level}"] = float(percentile(lat, 0.5) * 1000)
            result[f"svc_{level}_found"] = found
        return result


LAYOUTS = ("partitioned", "single")
VECTOR_CACHE_MB = 512


def run(
    admin_dsn: str,
    sizes: list[int],
    ops: int,
    base_url: str | None = None,
    layouts: tuple[str, ...] = LAYOUTS,
) -> list[dict[str, Any]]:
    """Each size in each layout: ``partitioned`` is the table KAOS creates for a new store
    (``pgfacts.create_partitioned``), ``single`` Mem0's own (a store created before, or
    ``KAOS_MEMORY_PG_PARTITIONS=0``)."""
    rows = []
    for size in sizes:
        for layout in layouts:
            rows.append(_run_one(admin_dsn, size, layout, ops, base_url))
    return rows


def _run_one(
    admin_dsn: str, size: int, layout: str, ops: int, base_url: str | None
) -> dict[str, Any]:
    rng = random.Random(size)
    name = unique_name("kaos_tenant_")
    dsn = create_database(admin_dsn, name)
    store = None
    try:
        with connect(dsn) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        store = mem0_pgvector(dsn, TABLE, DIMS)
        if layout == "partitioned":
            # As the service does for a new store.
            assert pgfacts.create_partitioned(store, DIMS)
        store._ensure_collection()
        load, build = _load(dsn, size, rng)
        tag = f"[tenant {size} {layout}]"
        print(f"{tag} loaded in {load:.1f}s, HNSW index built in {build:.1f}s", flush=True)
        # Mem0's own queries scan the whole table (hundreds of ms at 1M): fewer of them
        # above 100k facts keep the run short; KAOS's are measured ``ops`` times.
        ref_ops = ops if size <= 100_000 else max(20, ops * 100_000 // size)
        # Before: the table with Mem0's indexes only (HNSW and text).
        before = _mem0_search(store, rng, ref_ops)
        started = time.perf_counter()
        pgfacts.ensure_indexes(store.connection_pool, TABLE)
        with connect(dsn) as conn:
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(TABLE)))
        indexed = time.perf_counter() - started
        print(f"{tag} KAOS's indexes built in {indexed:.1f}s", flush=True)
        measured = _measure(store, size, rng, ops, ref_ops)
        store.connection_pool.close()
        if base_url is not None:
            measured.update(_service_recalls(dsn, base_url, ops))
        return {
            **measured,
            "layout": layout,
            "mem0_search_before": before,
            "load_s": load,
            "hnsw_s": build,
            "kaos_index_s": indexed,
        }
    finally:
        if store is not None:
            store.connection_pool.close()
        drop_database(admin_dsn, name)


def _filt(i: int) -> dict[str, str]:
    return {"kaos_group": TABLE, "user_id": PRINCIPALS[i % len(PRINCIPALS)]}


def _agent_filt(i: int) -> dict[str, str]:
    """An agent-level scope of a principal: both keys, as ``mem0_filter`` builds it."""
    return {**_filt(i), "agent_id": AGENTS[i % len(AGENTS)]}


def _vec(rng: random.Random) -> list[float]:
    return embeddings.embed(_query(rng), DIMS)


# Warm-up calls before each measurement: one per principal, so that the p50 is a
# service's steady state (each principal's rows once read into PostgreSQL's buffers),
# not the first read of each principal's pages after the load and the index builds.
WARM_UP = len(PRINCIPALS)


def _timed(fn: Any, ops: int) -> float:
    """p50 ms of ``fn(i)`` over ``ops`` calls, after as many warm-up calls (at most
    ``WARM_UP``: the references' full scans are measured fewer times, and warmed as much)."""
    for i in range(min(WARM_UP, ops)):
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


def _measure(store: Any, size: int, rng: random.Random, ops: int, ref_ops: int) -> dict[str, Any]:
    pool = store.connection_pool
    filt = _filt

    def vec() -> list[float]:
        return _vec(rng)

    def timed(fn: Any) -> float:
        return _timed(fn, ops)

    kaos_search = timed(lambda i: pg_search(pool, TABLE, vec(), filt(i), POOL))
    kaos_agent = timed(lambda i: pg_search(pool, TABLE, vec(), _agent_filt(i), POOL))
    mem0_search = _timed(
        lambda i: store.search(query="", vectors=vec(), top_k=POOL, filters=filt(i)), ref_ops
    )

    def old_page(i: int) -> None:
        listed = store.list(filters=filt(i), top_k=1_000_000)[0]
        sorted(listed, key=lambda r: (r.payload.get("created_at", ""), str(r.id)))[:PAGE]

    kaos_page = timed(
        lambda i: pgfacts.page(pool, TABLE, filt(i), PAGE, ("2026-01-01T00:00:00.000000", ""))
    )
    old = _timed(old_page, ref_ops)
    v = vec()
    kq, kp = pgfacts.search_query(TABLE, v, filt(7), POOL)
    aq, ap = pgfacts.search_query(TABLE, v, _agent_filt(7), POOL)
    mq, mp = _mem0_query(v, filt(7))
    return {
        "facts": size,
        "per_principal": size // len(PRINCIPALS),
        "kaos_search": kaos_search,
        "kaos_agent": kaos_agent,
        "mem0_search": mem0_search,
        "kaos_page": kaos_page,
        "old_page": old,
        "ref_ops": ref_ops,
        "kaos_plan": _plan(pool, kq, kp),
        "agent_plan": _plan(pool, aq, ap),
        "mem0_plan": _plan(pool, mq, mp),
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    # Each layout's "x 1k" is against its own smallest size.
    base = {r["layout"]: r for r in reversed(rows)}
    head = (
        f"{'layout':>12}{'facts':>9}{'/principal':>11}{'search kaos':>13}{'x 1k':>6}"
        f"{'agent kaos':>12}{'x 1k':>6}{'mem0 before':>13}{'mem0 after':>12}{'page kaos':>11}"
        f"{'page before':>13}{'ref ops':>9}"
    )
    print(
        "external mode, one principal's search (60 nearest) and a 100-fact page, p50 ms;"
        " agent: the search of one agent's facts of that principal; x 1k: p50 / p50 at the"
        " smallest size; mem0 before/after: Mem0's own search without/with KAOS's indexes"
        " (reference, 'ref ops' runs, as is page before: listing through PGVector.list);"
        " layout: partitioned by principal (a new store) or Mem0's single table"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        b = base[r["layout"]]
        print(
            f"{r['layout']:>12}{r['facts']:>9}{r['per_principal']:>11}{r['kaos_search']:>13.2f}"
            f"{r['kaos_search'] / b['kaos_search']:>6.1f}{r['kaos_agent']:>12.2f}"
            f"{r['kaos_agent'] / b['kaos_agent']:>6.1f}{r['mem0_search_before']:>13.2f}"
            f"{r['mem0_search']:>12.2f}{r['kaos_page']:>11.2f}{r['old_page']:>13.2f}"
            f"{r['ref_ops']:>9}"
        )
    if rows and all("svc_user" in r for r in rows):
        print()
        print(
            "a principal's recall through kaos-memory (POST /v1/recall, every tier, top_k 10),"
            " p50 ms: user = the principal's facts, agent = one agent's facts of the principal;"
            " x 1k: p50 / p50 at the smallest size (target at 1M: at most 2); found: facts"
            " in the last answer; held: principals whose vectors the service holds"
            f" (KAOS_MEMORY_VECTOR_CACHE_MB={VECTOR_CACHE_MB}; from 1,000 facts a principal)"
        )
        head = (
            f"{'layout':>12}{'facts':>9}{'recall user':>13}{'x 1k':>6}{'recall agent':>14}"
            f"{'x 1k':>6}{'found':>7}{'held':>6}"
        )
        print(head)
        print("-" * len(head))
        for r in rows:
            b = base[r["layout"]]
            print(
                f"{r['layout']:>12}{r['facts']:>9}{r['svc_user']:>13.2f}"
                f"{r['svc_user'] / b['svc_user']:>6.2f}{r['svc_agent']:>14.2f}"
                f"{r['svc_agent'] / b['svc_agent']:>6.2f}{r['svc_user_found']:>7}"
                f"{r['held']:>6.0f}"
            )
    for r in rows:
        print(
            f"at {r['facts']} facts ({r['layout']}): loaded in {r['load_s']:.1f}s, Mem0's HNSW"
            f" index built in {r['hnsw_s']:.1f}s, KAOS's indexes in {r['kaos_index_s']:.1f}s"
        )
    for r in rows:
        where = f"at {r['facts']} facts ({r['layout']})"
        print(f"plan {where}, KAOS: {r['kaos_plan']}")
        print(f"plan {where}, KAOS agent: {r['agent_plan']}")
        print(f"plan {where}, Mem0: {r['mem0_plan']}")
