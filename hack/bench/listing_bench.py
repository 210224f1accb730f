"""Listing cost in local mode: a 100-fact page of a scope as the Chroma store grows.

For each size N (facts spread over 100 principals x 20 agents x 1000 sessions, random
64-dimensional vectors, bulk inserted through Mem0's own Chroma store as
``memory_bench.preload`` does, then indexed with ``chromafacts.record`` batch by batch as
the write path does), one process measures side by side, p50 per page:

- KAOS: ``chromafacts.page`` (its own index: one seek after the cursor, then the page's
  payloads from Chroma by id);
- before: every row of the scope through Mem0's ``vector_store.list`` (Chroma's filter
  over the whole collection), sorted by ``(created_at, id)`` in Python, the rows after the
  cursor sliced;

for two scopes (one principal: N/100 facts; the whole store: N facts, the wildcard
filter) and two positions (the first page; a page 90% of the way through the scope).
The KAOS figures should stay flat in N; the "before" ones follow the scope and the store.

Usage: .venv/bin/python hack/bench/listing_bench.py [--sizes 1000,10000,100000] [--ops 20]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchlib import percentile  # noqa: E402
from kaos_memory.settings import MemorySettings  # noqa: E402
from kaos_memory.storage.mem0.chroma import facts as chromafacts  # noqa: E402
from kaos_memory.storage.mem0.terms import WILDCARD, to_entity_id  # noqa: E402

from tests.support.storage import settings_mem0_config  # noqa: E402

GROUP = "kaos_bench"
DIMS = 64
PAGE = 100
BATCH = 1000
PRINCIPALS = [f"user{i}" for i in range(100)]
AGENTS = [f"kaos://agent/bench/agent{i}" for i in range(20)]


def _memory(root: Path) -> Any:
    """A local-mode Mem0 store; no model is called (vectors are precomputed)."""
    settings = MemorySettings(
        storage="local",
        data_dir=root,
        collection="listing_bench",
        model_base_url="http://127.0.0.1:9/v1",
        embedding_dims=DIMS,
    )
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = str(settings.backend.mem0_dir)
    settings.backend.mem0_dir.mkdir(parents=True, exist_ok=True)
    settings.backend.chroma_dir.mkdir(parents=True, exist_ok=True)
    from mem0 import Memory

    return Memory.from_config(settings_mem0_config(settings))


def _load(memory: Any, count: int, rng: random.Random) -> tuple[float, float]:
    """Insert ``count`` facts; seconds spent in Chroma and in ``chromafacts.record``."""
    insert_s = record_s = 0.0
    for offset in range(0, count, BATCH):
        size = min(BATCH, count - offset)
        ids = [str(uuid.uuid4()) for _ in range(size)]
        payloads = []
        for i in range(size):
            n = offset + i
            session = f"session{rng.randrange(1000)}"
            payloads.append(
                {
                    "data": f"fact {n}",
                    "created_at": f"2026-01-01T{n // 3_600_000:02d}:{n // 60_000 % 60:02d}"
                    f":{n // 1000 % 60:02d}.{n % 1000:03d}000+00:00",
                    "user_id": to_entity_id(rng.choice(PRINCIPALS)),
                    "agent_id": to_entity_id(rng.choice(AGENTS)),
                    "run_id": session,
                    "kaos_group": GROUP,
                    "kaos_run": session,
                }
            )
        vectors = [[rng.random() for _ in range(DIMS)] for _ in range(size)]
        t0 = time.perf_counter()
        memory.vector_store.insert(vectors=vectors, ids=ids, payloads=payloads)
        t1 = time.perf_counter()
        chromafacts.record(memory, ids)
        insert_s += t1 - t0
        record_s += time.perf_counter() - t1
    return insert_s, record_s


def _old_page(
    memory: Any, filters: dict[str, str], after: tuple[str, str] | None
) -> list[tuple[str, dict[str, Any]]]:
    """What local-mode listing did before: the whole scope, sorted, then sliced."""
    rows = memory.vector_store.list(filters=filters, top_k=1_000_000)[0]
    items = sorted(
        ((str(r.payload.get("created_at") or ""), str(r.id)), r) for r in rows if r.payload
    )
    if after is not None:
        items = [i for i in items if i[0] > after]
    return [(str(r.id), r.payload) for _, r in items[:PAGE]]


def _p50(fn: Any, ops: int) -> float:
    fn()
    lat = []
    for _ in range(ops):
        t0 = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - t0)
    return float(percentile(lat, 0.5) * 1000)


def _late(memory: Any, filters: dict[str, str]) -> tuple[tuple[str, str], int]:
    """A cursor 90% of the way through the scope, and the scope's size (from the index)."""
    query, params = chromafacts.page_query(
        memory.vector_store.collection.name, filters, 1_000_000_000, None
    )
    with sqlite3.connect(chromafacts.index_file(memory)) as conn:
        keys = [(str(r[-1]), str(r[0])) for r in conn.execute(query, params)]
    return keys[int(len(keys) * 0.9)], len(keys)


def _old(fn: Any, ops: int) -> float | str:
    """p50 ms of the old way, or why Chroma refused it."""
    from chromadb.errors import ChromaError

    try:
        return _p50(fn, ops)
    except ChromaError as exc:
        return f"fails: {type(exc).__name__}: {str(exc).split(': ')[-1]}"


def _measure(memory: Any, filters: dict[str, str], ops: int, old_ops: int) -> dict[str, Any]:
    late, count = _late(memory, filters)
    from chromadb.errors import ChromaError

    kaos = [f for f, _ in chromafacts.page(memory, filters, PAGE, late)]
    try:
        old = [f for f, _ in _old_page(memory, filters, late)]
    except ChromaError:
        old = kaos  # the old way fails at this size (reported in the table)
    assert kaos == old, "both ways serve the same page"
    return {
        "scope_facts": count,
        "kaos_first": _p50(lambda: chromafacts.page(memory, filters, PAGE, None), ops),
        "kaos_late": _p50(lambda: chromafacts.page(memory, filters, PAGE, late), ops),
        "old_first": _old(lambda: _old_page(memory, filters, None), old_ops),
        "old_late": _old(lambda: _old_page(memory, filters, late), old_ops),
    }


def run(sizes: list[int], ops: int) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        rng = random.Random(size)
        root = Path(tempfile.mkdtemp(prefix="kaos-listing-bench-"))
        memory = _memory(root)
        try:
            insert_s, record_s = _load(memory, size, rng)
            print(
                f"[listing {size}] loaded: chroma {insert_s:.1f}s, index {record_s:.1f}s",
                file=sys.stderr,
                flush=True,
            )
            # The old way reads the whole scope per page: fewer rounds where that is slow.
            old_ops = max(3, ops // 4) if size >= 50_000 else ops
            scopes = {
                "principal": {"kaos_group": GROUP, "user_id": PRINCIPALS[7]},
                "store": {"kaos_group": GROUP, "run_id": WILDCARD},
            }
            for scope, filters in scopes.items():
                rows.append(
                    {
                        "facts": size,
                        "scope": scope,
                        **_measure(memory, filters, ops, old_ops),
                        "record_ms_per_fact": record_s * 1000 / size,
                        "insert_ms_per_fact": insert_s * 1000 / size,
                    }
                )
        finally:
            memory.close()
            shutil.rmtree(root, ignore_errors=True)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    print(
        "local mode, a 100-fact page in (created_at, id) order, p50 ms: KAOS (chromafacts) vs."
        " before (whole scope via Mem0's list, sorted); first page and a page 90% through"
    )
    head = (
        f"{'facts':>8}{'scope':>11}{'in scope':>10}{'kaos 1st':>10}{'kaos late':>11}"
        f"{'before 1st':>12}{'before late':>13}{'ratio late':>12}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        old_first, old_late = r["old_first"], r["old_late"]
        ratio = f"{old_late / r['kaos_late']:>12.0f}" if isinstance(old_late, float) else ""
        before = (
            f"{old_first:>12.1f}{old_late:>13.1f}{ratio}"
            if isinstance(old_first, float) and isinstance(old_late, float)
            else f"  before: {old_first}"
        )
        print(
            f"{r['facts']:>8}{r['scope']:>11}{r['scope_facts']:>10}{r['kaos_first']:>10.2f}"
            f"{r['kaos_late']:>11.2f}{before}"
        )
    seen = set()
    for r in rows:
        if r["facts"] not in seen:
            seen.add(r["facts"])
            print(
                f"write cost at {r['facts']} facts (batches of {BATCH}): Chroma insert"
                f" {r['insert_ms_per_fact']:.3f} ms/fact, chromafacts.record"
                f" {r['record_ms_per_fact']:.3f} ms/fact"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--ops", type=int, default=20)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    print_table(run(sizes, args.ops))


if __name__ == "__main__":
    main()
