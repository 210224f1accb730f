"""Writes while the model is slow: a write's latency with every model call taking
``--delay`` seconds (2 by default) and folds running all the time.

The memory design's promise is that background work (digests, fact extraction) never stalls the
request path. Here every chat and embedding call of the development model waits
``--delay`` seconds (its fault injection), the fold trigger is small so most writes
schedule a fold (a digest call and a Mem0 extraction, each several slow model calls),
and one client writes turns into many sessions for ``--seconds`` (a turn every 25 ms, an
agent's pace, so the slow folds have time to run and finish beside the writes), then 8
clients write as fast as they can.
Beside it, the same writes on an identical service whose model answers at once: the
difference is what slow background work costs a write. The folds finished during the
run are read from the service's own metrics, so the table shows they did run.

Run alone (``python hack/bench/slowmodel_bench.py``) or as part of ``hack/bench/memory``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import devmodel, memory_service, metrics, percentile, require_postgres  # noqa: E402

from tests.support.postgres import create_database, drop_database, unique_name  # noqa: E402
from tests.support.procs import ServiceProcess  # noqa: E402

SESSIONS = 20
WORDS = [
    "river",
    "budget",
    "doctor",
    "concert",
    "python",
    "winter",
    "garden",
    "invoice",
    "ocean",
    "camera",
]


def start_memory(
    name: str, mode: str, root: Path, model_url: str, dims: int, dsn: str | None
) -> ServiceProcess:
    env = {
        "KAOS_MEMORY_STORAGE": mode,
        "KAOS_MEMORY_DATA_DIR": str(root / name),
        "KAOS_MEMORY_DSN": dsn or "",
        "KAOS_MEMORY_COLLECTION": f"kaos_slow_{name.replace('-', '_')}",
        "KAOS_MEMORY_MODEL_BASE_URL": model_url,
        "KAOS_MEMORY_EMBEDDING_DIMS": str(dims),
        # A fold every few writes: about 60 tokens a turn against a 200-token trigger.
        "KAOS_MEMORY_TOKEN_BUDGET": "400",
        "KAOS_MEMORY_FOLD_TRIGGER": "200",
        "KAOS_MEMORY_FOLD_TARGET": "100",
        "KAOS_MEMORY_MODEL_TIMEOUT": "30",
        **{k[7:]: v for k, v in os.environ.items() if k.startswith("BENCHX_")},
    }
    return memory_service(name, env, root)


async def folds_done(http: aiohttp.ClientSession, svc: ServiceProcess) -> int:
    samples = await metrics(http, svc.url)
    return int(samples.get('kaos_memory_folds_total{outcome="done"}', 0))


async def writes(
    http: aiohttp.ClientSession,
    svc: ServiceProcess,
    concurrency: int,
    tag: str,
    *,
    ops: int = 0,
    seconds: float = 0.0,
    pause: float = 0.0,
) -> list[float]:
    """``ops`` writes, or as many as ``seconds`` allow with ``pause`` after each."""
    rng = random.Random(concurrency)
    latencies: list[float] = []
    counter = iter(range(ops)) if ops else itertools.count()
    deadline = time.monotonic() + seconds

    async def worker() -> None:
        for i in counter:
            if seconds and time.monotonic() > deadline:
                return
            session = i % SESSIONS
            hdrs = {
                "X-Agent-Identity": "kaos://agent/bench/writer",
                "X-Principal": f"user{session}",
                "X-Session-Id": f"{tag}-{session}",
            }
            text = " ".join(rng.choice(WORDS) for _ in range(40))
            body = {"turns": [{"role": "user", "content": f"turn {i}: {text}"}]}
            started = time.perf_counter()
            async with http.post(f"{svc.url}/v1/write", json=body, headers=hdrs) as resp:
                doc = await resp.json()
                assert resp.status in (200, 202), doc
            latencies.append(time.perf_counter() - started)
            if pause:
                # Pacing, not synchronisation: an agent writes a turn now and then.
                await asyncio.sleep(pause)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def measure(
    services: dict[str, ServiceProcess], model_url: str, delay: float, ops: int, seconds: float
) -> list[dict[str, Any]]:
    rows = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http:
        control = model_url.removesuffix("/v1")
        for name, svc in services.items():
            slow = name.endswith("slow")
            faults = {"delay": delay if slow else 0.0, "routes": ["chat", "embeddings"]}
            async with http.post(f"{control}/control/faults", json=faults) as resp:
                assert resp.status == 200, await resp.text()
            before = await folds_done(http, svc)
            seq = await writes(http, svc, 1, f"{name}-seq", seconds=seconds, pause=0.025)
            conc = await writes(http, svc, 8, f"{name}-conc", ops=ops)
            rows.append(
                {
                    "service": name,
                    "seq_p50": percentile(seq, 0.5) * 1000,
                    "seq_p99": percentile(seq, 0.99) * 1000,
                    "conc_p50": percentile(conc, 0.5) * 1000,
                    "conc_p99": percentile(conc, 0.99) * 1000,
                    "writes": len(seq) + len(conc),
                    "folds": await folds_done(http, svc) - before,
                }
            )
        async with http.post(f"{control}/control/faults", json={}) as resp:
            assert resp.status == 200
    return rows


def run(
    model_url: str,
    dims: int,
    ops: int,
    seconds: float,
    delay: float,
    modes: list[str],
    admin_dsn: str | None,
) -> list[dict[str, Any]]:
    root = Path(tempfile.mkdtemp(prefix="kaos-bench-slow-"))
    started: list[ServiceProcess] = []
    db_name = None
    try:
        dsn = None
        if "external" in modes:
            assert admin_dsn is not None
            db_name = unique_name("kaos_slow_")
            dsn = create_database(admin_dsn, db_name)
        services = {}
        for mode in modes:
            for speed in ("fast", "slow"):
                name = f"{mode}-{speed}"
                svc = start_memory(name, mode, root, model_url, dims, dsn)
                started.append(svc)
                services[name] = svc
        return asyncio.run(measure(services, model_url, delay, ops, seconds))
    finally:
        for svc in reversed(started):
            svc.stop(timeout=60)
        if db_name is not None and admin_dsn is not None:
            drop_database(admin_dsn, db_name)
        shutil.rmtree(root, ignore_errors=True)


def print_table(rows: list[dict[str, Any]], delay: float) -> None:
    print(f"writes while every model call takes {delay:g} s and folds run (fast: the same at once)")
    head = (
        f"{'service':<15}{'seq p50':>9}{'seq p99':>9}{'c8 p50':>9}{'c8 p99':>9}{'writes':>8}"
        f"{'folds':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['service']:<15}{r['seq_p50']:>9.2f}{r['seq_p99']:>9.2f}"
            f"{r['conc_p50']:>9.2f}{r['conc_p99']:>9.2f}{r['writes']:>8}{r['folds']:>7}"
        )
    print(
        "(latencies in ms; seq: one client, a turn every 25 ms; c8: 8 clients at full speed;"
        " folds = digest folds finished during the writes; target p99 < 20 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=300, help="writes of the 8 clients")
    parser.add_argument("--seconds", type=float, default=30.0, help="the paced writer's time")
    parser.add_argument("--delay", type=float, default=2.0, help="seconds per model call")
    parser.add_argument("--modes", default="local,external")
    parser.add_argument("--dims", type=int, default=64, help="embedding dimension")
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    admin = require_postgres("external mode") if "external" in modes else None
    with devmodel(args.dims) as model:
        rows = run(f"{model.url}/v1", args.dims, args.ops, args.seconds, args.delay, modes, admin)
        print_table(rows, args.delay)


if __name__ == "__main__":
    main()
