"""Memory service benchmark: write and recall through the service vs. Mem0 called directly.

For each storage mode (local: SQLite + Chroma; external: PostgreSQL + pgvector) and each
long-term size (default 1k and 100k facts):

1. Preload the vector store with N facts spread over 50 principals x 20 agents, bulk
   inserted through Mem0's own vector store (``infer=False`` semantics, batched
   embeddings from the development model): going through extraction would take hours.
   In external mode the same rows go into two tables: the service's, partitioned by
   principal as the service creates a new store's, and the library's, as Mem0 creates it.
2. Start ``kaos-memory`` on it and measure ``POST /v1/write`` (one turn) and
   ``POST /v1/recall`` (agent level with a principal, all tiers) sequentially
   (p50/p99 latency) and with concurrent clients (throughput).
3. Stop the service and measure the same operations on the Mem0 library in one
   process: ``Memory.add(infer=False)`` and ``Memory.search`` with the same filter.

It prints one table; "ratio" is service p50 / library p50 (the service's overhead for
recall; for write it shows that the request path does not run Mem0 at all).
Embeddings come from ``kaos-devmodel`` (hashed bag of words, 64 dims by default), so the
figures measure the service and the stores, not a model.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import auth_bench  # noqa: E402
import encryption_bench  # noqa: E402
import listing_bench  # noqa: E402
import slowmodel_bench  # noqa: E402
import tenant_bench  # noqa: E402
import tracing_bench  # noqa: E402
from benchlib import (  # noqa: E402
    all_zero,
    before_path,
    devmodel,
    memory_service,
    percentile,
    require_postgres,
    until_metrics,
)
from kaos_memory.settings import MemorySettings  # noqa: E402
from kaos_memory.storage.mem0.pgvector import facts as pgfacts  # noqa: E402
from kaos_memory.storage.mem0.terms import to_entity_id  # noqa: E402

from tests.support.postgres import (  # noqa: E402
    create_database,
    drop_database,
    pg_query,
    unique_name,
)
from tests.support.storage import settings_mem0_config  # noqa: E402

GROUP = "kaos_bench"
PRINCIPALS = [f"user{i}" for i in range(50)]
AGENTS = [f"kaos://agent/bench/agent{i}" for i in range(20)]
WORDS = [
    "apple",
    "river",
    "mountain",
    "coffee",
    "train",
    "music",
    "garden",
    "winter",
    "python",
    "kubernetes",
    "memory",
    "budget",
    "travel",
    "doctor",
    "birthday",
    "project",
    "meeting",
    "holiday",
    "language",
    "recipe",
    "football",
    "camera",
    "bicycle",
    "library",
    "ocean",
    "concert",
    "painting",
    "startup",
    "invoice",
    "password",
]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(10))


def summary(latencies: list[float], elapsed: float) -> dict[str, float]:
    return {
        "p50_ms": percentile(latencies, 0.50) * 1000,
        "p99_ms": percentile(latencies, 0.99) * 1000,
        "ops_s": len(latencies) / elapsed if elapsed > 0 else 0.0,
    }


# External mode: the library's own table, as Mem0 creates it (one table), beside the
# service's (partitioned by principal, as the service creates a new store's): each side
# is measured on the layout it would have, with the same facts in both.
LIBRARY_COLLECTION = f"{GROUP}_mem0"


def settings_for(
    mode: str, data_dir: Path, dsn: str | None, base_url: str, dims: int, collection: str = GROUP
) -> MemorySettings:
    return MemorySettings(
        storage=mode,  # type: ignore[arg-type]
        data_dir=data_dir,
        dsn=dsn,
        collection=collection,
        model_base_url=base_url,
        embedding_dims=dims,
    )


def open_memory(settings: MemorySettings) -> Any:
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = str(settings.backend.mem0_dir)
    settings.backend.mem0_dir.mkdir(parents=True, exist_ok=True)
    from mem0 import Memory

    return Memory.from_config(settings_mem0_config(settings))


def close_memory(memory: Any) -> None:
    pool = getattr(memory.vector_store, "connection_pool", None)
    if pool is not None:
        pool.close()
    memory.close()


def partitioned(memory: Any, settings: MemorySettings) -> Any:
    """``memory``'s pgvector table created as the service creates a new store's."""
    assert pgfacts.create_partitioned(
        memory.vector_store, settings.models.embedding_dims, settings.backend.pg_partitions
    )
    return memory


def preload(memory: Any, count: int, rng: random.Random, mirror: Any = None) -> float:
    """Insert ``count`` facts in batches, shaped as Mem0's ``infer=False`` path shapes them
    (the same rows into ``mirror``'s vector store too, when given)."""
    started = time.perf_counter()
    batch = 500
    for offset in range(0, count, batch):
        size = min(batch, count - offset)
        texts = [f"fact {offset + i}: {sentence(rng)}" for i in range(size)]
        vectors = memory.embedding_model.embed_batch(texts, "add")
        now = datetime.now(UTC).isoformat()
        payloads = []
        for text in texts:
            principal, agent = rng.choice(PRINCIPALS), rng.choice(AGENTS)
            session = f"session{rng.randrange(1000)}"
            payloads.append(
                {
                    "data": text,
                    "hash": hashlib.md5(text.encode()).hexdigest(),
                    "text_lemmatized": text,
                    "created_at": now,
                    "updated_at": now,
                    "role": "user",
                    "user_id": to_entity_id(principal),
                    "agent_id": to_entity_id(agent),
                    "run_id": to_entity_id(session),
                    "kaos_group": GROUP,
                    "kaos_run": session,
                }
            )
        ids = [str(uuid.uuid4()) for _ in texts]
        memory.vector_store.insert(vectors=vectors, ids=ids, payloads=payloads)
        if mirror is not None:
            mirror.vector_store.insert(vectors=vectors, ids=ids, payloads=payloads)
        if (offset // batch) % 20 == 0:
            print(f"    preloaded {offset + size}/{count}", file=sys.stderr, flush=True)
    return time.perf_counter() - started


async def measure(
    op: Callable[[int], Awaitable[bool]], count: int, concurrency: int
) -> dict[str, float]:
    """Run ``op`` ``count`` times on ``concurrency`` workers; ``op`` answers "degraded"."""
    latencies: list[float] = []
    degraded = 0
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        nonlocal degraded
        while not queue.empty():
            i = queue.get_nowait()
            started = time.perf_counter()
            if await op(i):
                degraded += 1
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return {**summary(latencies, time.perf_counter() - started), "degraded": degraded / count}


async def bench_service(url: str, ops: int, concurrency: int, rng: random.Random) -> dict[str, Any]:
    timeout = aiohttp.ClientTimeout(total=60)
    found: list[int] = []
    async with aiohttp.ClientSession(timeout=timeout) as http:

        def hdrs(i: int) -> dict[str, str]:
            return {
                "Content-Type": "application/json",
                "X-Agent-Identity": AGENTS[i % len(AGENTS)],
                "X-Principal": PRINCIPALS[i % len(PRINCIPALS)],
                # A session is one principal's (and agent's): 100 = lcm(50 principals, 20 agents).
                "X-Session-Id": f"bench-session-{i % 100}",
            }

        async def write(i: int) -> bool:
            body = {"turns": [{"role": "user", "content": sentence(rng)}], "infer": False}
            async with http.post(f"{url}/v1/write", json=body, headers=hdrs(i)) as resp:
                doc = await resp.json()
                assert resp.status in (200, 202), doc
                return bool(doc["degraded"])

        async def recall(i: int) -> bool:
            body = {"level": "agent", "query": sentence(rng), "top_k": 10}
            async with http.post(f"{url}/v1/recall", json=body, headers=hdrs(i)) as resp:
                doc = await resp.json()
                # Degraded = the long-term search missed KAOS_MEMORY_RECALL_TIMEOUT.
                assert resp.status == 200, doc
                found.append(len(doc["long_term"]["facts"]))
                return bool(doc["degraded"])

        async def window(i: int) -> bool:
            # The window alone: what an agent reads before every model call.
            body = {"level": "session", "query": sentence(rng), "include": ["short_term"]}
            async with http.post(f"{url}/v1/recall", json=body, headers=hdrs(i)) as resp:
                doc = await resp.json()
                assert resp.status == 200, doc
                return bool(doc["degraded"])

        async def background_idle() -> None:
            """Until the writes' folds are done: recall is measured on a quiet service, as
            the library is."""
            await until_metrics(
                http,
                url,
                all_zero("kaos_memory_executor_queue_depth", "kaos_memory_executor_in_flight"),
                "background work still running",
            )

        # Warm-up: first requests pay lazy imports and connection set-up.
        for i in range(10):
            await recall(i)
        written = {
            "write": await measure(write, ops, 1),
            "write_conc": await measure(write, ops, concurrency),
        }
        await background_idle()
        found.clear()
        return {
            **written,
            "window": await measure(window, ops, 1),
            "window_conc": await measure(window, ops, concurrency),
            "recall": await measure(recall, ops, 1),
            "recall_conc": await measure(recall, max(ops, 4 * concurrency), concurrency),
            "recall_found": sum(found) / max(1, len(found)),
        }


def bench_library(memory: Any, ops: int, concurrency: int, rng: random.Random) -> dict[str, Any]:
    """The same operations on the Mem0 library: one at a time, and searches driven by a
    pool of ``concurrency`` threads (how an application embeds Mem0 to serve many
    clients: the reference of the service's throughput)."""

    def timed(op: Callable[[int], None]) -> dict[str, float]:
        latencies = []
        started = time.perf_counter()
        for i in range(ops):
            t0 = time.perf_counter()
            op(i)
            latencies.append(time.perf_counter() - t0)
        return summary(latencies, time.perf_counter() - started)

    def threaded(op: Callable[[int], None], count: int) -> dict[str, float]:
        latencies: list[float] = []

        def one(i: int) -> None:
            t0 = time.perf_counter()
            op(i)
            latencies.append(time.perf_counter() - t0)

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            list(pool.map(one, range(count)))
        return summary(latencies, time.perf_counter() - started)

    def ids(i: int) -> dict[str, str]:
        return {
            "user_id": to_entity_id(PRINCIPALS[i % len(PRINCIPALS)]),
            "agent_id": to_entity_id(AGENTS[i % len(AGENTS)]),
        }

    def write(i: int) -> None:
        memory.add(
            sentence(rng),
            **ids(i),
            run_id=f"lib-session-{i % 100}",
            metadata={"kaos_group": GROUP},
            infer=False,
        )

    found: list[int] = []

    def recall(i: int) -> None:
        result = memory.search(sentence(rng), top_k=10, filters={**ids(i), "kaos_group": GROUP})
        found.append(len(result["results"]))

    for i in range(10):
        recall(i)
    found.clear()
    return {
        "write": timed(write),
        "recall": timed(recall),
        "recall_conc": threaded(recall, max(ops, 4 * concurrency)),
        "recall_found": sum(found) / max(1, len(found)),
    }


def run_mode(
    mode: str, size: int, args: argparse.Namespace, base_url: str, admin_dsn: str | None
) -> list[dict[str, Any]]:
    rng = random.Random(size)
    root = Path(tempfile.mkdtemp(prefix=f"kaos-bench-{mode}-"))
    db_name = None
    dsn = None
    if mode == "external":
        assert admin_dsn is not None
        db_name = unique_name("kaos_bench_")
        dsn = create_database(admin_dsn, db_name)
        pg_query(dsn, "CREATE EXTENSION IF NOT EXISTS vector")
    try:
        settings = settings_for(mode, root / "data", dsn, base_url, args.dims)
        library_settings = settings
        print(f"[{mode} {size}] preloading", file=sys.stderr, flush=True)
        memory = open_memory(settings)
        mirror = None
        if mode == "external":
            library_settings = settings_for(
                mode, root / "data", dsn, base_url, args.dims, LIBRARY_COLLECTION
            )
            partitioned(memory, settings)
            mirror = open_memory(library_settings)
        load_s = preload(memory, size, rng, mirror)
        close_memory(memory)
        if mirror is not None:
            close_memory(mirror)
        if dsn is not None:
            # Both tables with their statistics, as autovacuum leaves a table some time after
            # a bulk load: without them the planner may drive Mem0's filtered search through
            # its HNSW index, far slower than its scan of a table this size.
            for table in (GROUP, LIBRARY_COLLECTION):
                pg_query(dsn, f"ANALYZE {table}")
        print(f"[{mode} {size}] preload took {load_s:.1f}s; starting service", file=sys.stderr)
        env = {
            "KAOS_MEMORY_STORAGE": mode,
            "KAOS_MEMORY_DATA_DIR": str(settings.backend.data_dir),
            "KAOS_MEMORY_DSN": dsn or "",
            "KAOS_MEMORY_COLLECTION": GROUP,
            "KAOS_MEMORY_MODEL_BASE_URL": base_url,
            "KAOS_MEMORY_EMBEDDING_DIMS": str(args.dims),
        }
        before = None
        if args.before:
            # The earlier code first, on the same preloaded store (a newer service may
            # migrate the database; an older one must not meet a newer schema).
            old = {**env, "PYTHONPATH": before_path(args.before)}
            svc = memory_service(f"{mode}-before", old, root)
            try:
                before = asyncio.run(bench_service(svc.url, args.ops, args.concurrency, rng))
            finally:
                svc.stop(timeout=60)
        svc = memory_service(mode, env, root)
        try:
            service = asyncio.run(bench_service(svc.url, args.ops, args.concurrency, rng))
        finally:
            svc.stop(timeout=60)
        memory = open_memory(library_settings)
        try:
            library = bench_library(memory, args.ops, args.concurrency, rng)
        finally:
            close_memory(memory)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if db_name is not None and admin_dsn is not None:
            drop_database(admin_dsn, db_name)
    rows = []
    for op in ("write", "window", "recall"):
        s, c = service[op], service[f"{op}_conc"]
        lib = library.get(op)
        lib_conc = library.get(f"{op}_conc")
        rows.append(
            {
                "mode": mode,
                "facts": size,
                "op": op,
                "svc_p50": s["p50_ms"],
                "svc_p99": s["p99_ms"],
                "svc_conc_ops": c["ops_s"],
                "svc_conc_p99": c["p99_ms"],
                "degraded": max(s["degraded"], c["degraded"]),
                "lib_p50": lib["p50_ms"] if lib else float("nan"),
                "lib_conc_ops": lib_conc["ops_s"] if lib_conc else float("nan"),
                "svc_found": service.get(f"{op}_found", float("nan")),
                "lib_found": library.get(f"{op}_found", float("nan")),
                "before_p50": before[op]["p50_ms"] if before else float("nan"),
                "before_p99": before[op]["p99_ms"] if before else float("nan"),
            }
        )
    return rows


def print_before(rows: list[dict[str, Any]], ref: str) -> None:
    head = f"{'mode':<9}{'facts':>8} {'op':<7}{'before p50':>11}{'now p50':>9}{'+ms':>7}"
    head += f"{'before p99':>11}{'now p99':>9}"
    print(f"The service as of {ref} (before) and now, in this run:")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['mode']:<9}{r['facts']:>8} {r['op']:<7}{r['before_p50']:>11.2f}"
            f"{r['svc_p50']:>9.2f}{r['svc_p50'] - r['before_p50']:>7.2f}"
            f"{r['before_p99']:>11.2f}{r['svc_p99']:>9.2f}"
        )


def print_table(rows: list[dict[str, Any]], concurrency: int) -> None:
    c = f"c{concurrency}"
    head = (
        f"{'mode':<9}{'facts':>8} {'op':<7}"
        f"{'svc p50':>9}{'svc p99':>9}{'lib p50':>9}{'p50 x':>7}"
        f"{f'svc {c}/s':>10}{f'{c} p99':>9}{f'lib {c}/s':>10}{'ops x':>7}{'degr':>6}"
        f"{'found':>12}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        p50_ratio = r["svc_p50"] / r["lib_p50"]
        ops_ratio = r["svc_conc_ops"] / r["lib_conc_ops"]
        print(
            f"{r['mode']:<9}{r['facts']:>8} {r['op']:<7}"
            f"{r['svc_p50']:>9.2f}{r['svc_p99']:>9.2f}{r['lib_p50']:>9.2f}{p50_ratio:>7.2f}"
            f"{r['svc_conc_ops']:>10.0f}{r['svc_conc_p99']:>9.2f}{r['lib_conc_ops']:>10.0f}"
            f"{ops_ratio:>7.2f}{r['degraded'] * 100:>5.0f}%"
            f"{r['svc_found']:>6.1f}/{r['lib_found']:<5.1f}"
        )
    print(
        "(latencies in ms; lib: the Mem0 library in one process (add with infer=False, search),"
        f" lib {c}/s: its search driven by {concurrency} threads; p50 x = svc p50 / lib p50"
        " (target for recall <= 1.15); ops x = svc / lib throughput at"
        f" {concurrency} clients (target for recall >= 2); window: a session's window alone"
        " (target p50 < 3 ms); degr = share of answers marked degraded; found = facts a"
        " recall returned on average, service/library, of the 10 asked)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="local,external")
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--ops", type=int, default=300, help="operations per measurement")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--dims", type=int, default=64, help="embedding dimension")
    parser.add_argument(
        "--before",
        metavar="REF",
        help="also measure the service as of this commit, on the same store, in the same run",
    )
    parser.add_argument(
        "--verification-ops",
        type=int,
        default=500,
        help="requests per operation for verification off vs on (auth_bench.py); 0 skips it",
    )
    parser.add_argument(
        "--tracing-ops",
        type=int,
        default=500,
        help="requests per operation for tracing off vs on (tracing_bench.py); 0 skips it",
    )
    parser.add_argument(
        "--encryption-ops",
        type=int,
        default=500,
        help="requests per operation for encryption at rest off vs on (encryption_bench.py);"
        " 0 skips it",
    )
    parser.add_argument(
        "--tenant-sizes",
        default="1000,100000",
        help="external mode: store sizes for one principal's search and listing cost and their"
        " query plans (tenant_bench.py); empty skips it",
    )
    parser.add_argument(
        "--listing-sizes",
        default="1000,10000,100000",
        help="local mode: store sizes for listing pages on Chroma (listing_bench.py); empty"
        " skips it",
    )
    parser.add_argument(
        "--slow-seconds",
        type=float,
        default=30.0,
        help="writes while every model call takes 2 s (slowmodel_bench.py): the paced"
        " writer's time per service; 0 skips it",
    )
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    admin_dsn = require_postgres("external mode") if "external" in modes else None
    rows: list[dict[str, Any]] = []
    with devmodel(args.dims) as model:
        for size in sizes:
            for mode in modes:
                rows += run_mode(mode, size, args, f"{model.url}/v1", admin_dsn)
                print_table(rows, args.concurrency)
                if args.before:
                    print_before(rows, args.before)
        if args.slow_seconds > 0:
            print()
            slow = slowmodel_bench.run(
                f"{model.url}/v1", args.dims, args.ops, args.slow_seconds, 2.0, modes, admin_dsn
            )
            slowmodel_bench.print_table(slow, 2.0)
        listing_sizes = [int(s) for s in args.listing_sizes.split(",") if s]
        if listing_sizes and "local" in modes:
            print()
            listing_bench.print_table(listing_bench.run(listing_sizes, 20))
        tenant_sizes = [int(s) for s in args.tenant_sizes.split(",") if s]
        if tenant_sizes and admin_dsn is not None:
            print()
            tenant_bench.print_table(
                tenant_bench.run(admin_dsn, tenant_sizes, args.ops, f"{model.url}/v1")
            )
        if args.verification_ops > 0:
            print()
            auth_bench.print_table(
                auth_bench.run(f"{model.url}/v1", args.dims, args.verification_ops)
            )
        if args.encryption_ops > 0:
            print()
            encryption_bench.print_table(
                encryption_bench.run(
                    f"{model.url}/v1", args.dims, args.encryption_ops, tuple(modes), admin_dsn
                )
            )
        if args.tracing_ops > 0:
            print()
            tracing_bench.print_table(
                tracing_bench.run(f"{model.url}/v1", args.dims, args.tracing_ops)
            )


if __name__ == "__main__":
    main()
