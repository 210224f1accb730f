"""Memory service replicas benchmark: write throughput with 1, 2 and 3 replicas on one
PostgreSQL, and how long a fold takes to reach the digest and long-term memory.

For each replica count, on a fresh database: start the replicas (external mode), write
``--sessions`` x ``--pairs`` user+assistant pairs through all of them at once (each
session's writes round-robin over the replicas, two in flight per session), then wait
until every fold is digested and extracted. It prints one table:

- writes/s: answered ``POST /v1/write`` per second of wall time, and the scaling factor
  over one replica;
- fold latency: from the write that evicted the turns (the fold row's ``created_at``) to
  the digest version covering it, and to its extraction into Mem0 (p50 / p95), under that
  load; and the time to drain the outbox after the last write;
- quiet fold latency: with no other load, from the answer of the write that recorded a
  fold until its digest and extraction are both done.

Everything runs on this machine: the load driver, the replicas, the development model
(which answers extraction and digest prompts in microseconds, so the figures measure the
service, PostgreSQL and Mem0, not a model) and PostgreSQL share its cores. On a 2-core
machine more replicas cannot add CPU; the scaling factor shows the cost of coordination,
not the scaling a cluster gives.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchlib import devmodel, percentile, require_postgres  # noqa: E402

from tests.fixtures.memory import MemoryServer, start_memory  # noqa: E402
from tests.integration.memory.replica_load import LoadResult, drive, settle, write_pair  # noqa: E402
from tests.support.postgres import (  # noqa: E402
    create_database,
    drop_database,
    unique_name,
)

TRIGGER = 400


def seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def fold_latencies(server: MemoryServer) -> tuple[list[float], list[float]]:
    db = server.db
    digests = {
        (k, v): at
        for k, v, at in db.relational("SELECT key, version, created_at FROM kaos_mem_digests")
    }
    to_digest: list[float] = []
    to_extraction: list[float] = []
    for key, version, created, extracted in db.relational(
        "SELECT key, digest_version, created_at, extracted_at FROM kaos_mem_folds"
    ):
        if (key, version) in digests:
            to_digest.append(seconds_between(created, digests[(key, version)]))
        if extracted is not None:
            to_extraction.append(seconds_between(created, extracted))
    return to_digest, to_extraction


async def run(
    replicas: int, args: argparse.Namespace, model_url: str, admin: str
) -> dict[str, Any]:
    name = unique_name("kaos_bench_")
    dsn = create_database(admin, name)
    root = Path(tempfile.mkdtemp(prefix="kaos-bench-replicas-"))
    settings = {
        "token_budget": TRIGGER,
        "digest_retention": 100_000,
        "idle_flush_seconds": 0,
        "sweep_interval": 1,
        "executor_queue_size": 4096,
        "log_level": "WARNING",
    }
    servers: list[MemoryServer] = []
    try:
        for i in range(replicas):
            servers.append(
                start_memory(
                    backend="external",
                    root=root / f"replica-{i}",
                    dsn=dsn,
                    model_base_url=model_url,
                    overrides=settings,
                )
            )
        started = time.monotonic()
        load = await drive(
            [s.url for s in servers], sessions=args.sessions, pairs_per_session=args.pairs
        )
        wrote = time.monotonic() - started
        if load.failures:
            print(
                f"  {len(load.failures)} failed writes, e.g. {load.failures[:2]}", file=sys.stderr
            )
        await settle(servers[0].db, servers, trigger=TRIGGER, within=1800)
        drained = time.monotonic() - started - wrote
        to_digest, to_extraction = fold_latencies(servers[0])
        quiet = await quiet_fold_latency(servers, args.quiet_folds)
        return {
            "replicas": replicas,
            "writes": load.writes,
            "writes_per_s": load.writes / wrote,
            "folds": len(to_extraction),
            "digest_p50": percentile(to_digest, 0.5),
            "digest_p95": percentile(to_digest, 0.95),
            "extract_p50": percentile(to_extraction, 0.5),
            "extract_p95": percentile(to_extraction, 0.95),
            "drain_s": drained,
            "quiet_p50": percentile(quiet, 0.5),
            "quiet_p95": percentile(quiet, 0.95),
        }
    finally:
        for server in servers:
            server.stop(timeout=30)
        drop_database(admin, name)
        shutil.rmtree(root, ignore_errors=True)


async def quiet_fold_latency(servers: list[MemoryServer], folds: int) -> list[float]:
    """Fold latency without load: one session at a time writes until a write records a
    fold (202), then waits until that fold is digested and extracted; seconds from the
    write's answer to both done."""
    db = servers[0].db
    out: list[float] = []
    async with aiohttp.ClientSession() as http:
        for i in range(folds):
            session = f"quiet-{uuid.uuid4().hex[:8]}"
            result = LoadResult()
            n = 0
            while True:
                url = servers[(i + n) % len(servers)].url
                status = await write_pair(http, url, session, "quiet-user", n, result)
                n += 1
                if status == 202:
                    break
            answered = time.monotonic()
            key_like = f"%|run:{session}"
            while True:
                rows = db.relational(
                    "SELECT COUNT(*) FROM kaos_mem_folds WHERE key LIKE %s"
                    " AND digest_status = 'done' AND extraction_status = 'done'",
                    (key_like,),
                )
                if rows[0][0] >= 1:
                    break
                await asyncio.sleep(0.005)  # polling interval of a measurement
            out.append(time.monotonic() - answered)
    return out


def print_table(rows: list[dict[str, Any]]) -> None:
    base = rows[0]["writes_per_s"] if rows else 1.0
    print()
    print(
        "| replicas | writes | writes/s | scaling | folds | fold->digest p50 / p95 (s)"
        " | fold->extraction p50 / p95 (s) | drain after load (s) | quiet fold p50 / p95 (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['replicas']} | {r['writes']} | {r['writes_per_s']:.0f} |"
            f" {r['writes_per_s'] / base:.2f}x | {r['folds']} |"
            f" {r['digest_p50']:.2f} / {r['digest_p95']:.2f} |"
            f" {r['extract_p50']:.2f} / {r['extract_p95']:.2f} | {r['drain_s']:.1f} |"
            f" {r['quiet_p50'] * 1000:.0f} / {r['quiet_p95'] * 1000:.0f} |"
        )
    print(
        "\n(one machine: the load driver, every replica, the development model and PostgreSQL"
        " share its cores; see the module docstring)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicas", default="1,2,3")
    parser.add_argument("--sessions", type=int, default=60)
    parser.add_argument("--pairs", type=int, default=50, help="write requests per session")
    parser.add_argument("--quiet-folds", type=int, default=20, help="folds timed without load")
    args = parser.parse_args()
    admin = require_postgres("the replicas benchmark")
    rows: list[dict[str, Any]] = []
    with devmodel(64) as model:
        for n in [int(x) for x in args.replicas.split(",") if x]:
            rows.append(asyncio.run(run(n, args, f"{model.url}/v1", admin)))
            print_table(rows)


if __name__ == "__main__":
    main()
