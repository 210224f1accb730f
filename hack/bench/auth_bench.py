"""What verified agent identity costs a memory call: the same requests to two memory
services side by side, one with token verification off (trusted headers) and one in
``jwks`` mode (every request carries the agent's service-account token, verified offline
against the issuer's cached keys).

The issuer is the local service-account issuer of ``make run --secure``
(``tests/support/devissuer.py``: discovery document and keys over HTTPS on loopback,
tokens with the claims kube-apiserver gives a projected token). Both services run on the
same development model and the same kind of store (local mode), each with its own data
directory; requests alternate between them so both see the same machine noise. A write is
one turn (``infer: false``); a recall is a session-level recall of all tiers (the window
path: what every agent turn costs) and an agent-level long-term recall.

Run alone (``python hack/bench/auth_bench.py``) or as part of ``hack/bench/memory``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import devmodel, memory_service, percentile  # noqa: E402
from kaos_core import wire  # noqa: E402
from kaos_core.auth import names  # noqa: E402

from tests.support.devissuer import DevIssuer  # noqa: E402
from tests.support.procs import ServiceProcess  # noqa: E402

NAMESPACE, AGENT = "bench", "agent0"
IDENTITY = f"kaos://agent/{NAMESPACE}/{AGENT}"
Op = Callable[
    [aiohttp.ClientSession, ServiceProcess, dict[str, str], int], Coroutine[Any, Any, None]
]


def start_memory(
    name: str, root: Path, model_url: str, dims: int, auth: dict[str, str]
) -> ServiceProcess:
    env = {
        "KAOS_MEMORY_STORAGE": "local",
        "KAOS_MEMORY_DATA_DIR": str(root / name),
        "KAOS_MEMORY_MODEL_BASE_URL": model_url,
        "KAOS_MEMORY_EMBEDDING_DIMS": str(dims),
        **auth,
    }
    return memory_service(name, env, root)


async def write(
    http: aiohttp.ClientSession, svc: ServiceProcess, hdrs: dict[str, str], i: int
) -> None:
    body = {"turns": [{"role": "user", "content": f"bench turn {i} about rivers"}], "infer": False}
    async with http.post(f"{svc.url}/v1/write", json=body, headers=hdrs) as resp:
        assert resp.status in (200, 202), await resp.text()
        await resp.read()


async def recall_session(
    http: aiohttp.ClientSession, svc: ServiceProcess, hdrs: dict[str, str], i: int
) -> None:
    body = {"level": "session", "query": f"rivers {i}"}
    async with http.post(f"{svc.url}/v1/recall", json=body, headers=hdrs) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()


async def recall_agent(
    http: aiohttp.ClientSession, svc: ServiceProcess, hdrs: dict[str, str], i: int
) -> None:
    body = {"level": "agent", "query": f"rivers {i}", "include": ["long_term"], "top_k": 10}
    async with http.post(f"{svc.url}/v1/recall", json=body, headers=hdrs) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()


async def measure(
    services: dict[str, tuple[ServiceProcess, dict[str, str]]], ops: int
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        # Warm-up: lazy imports, connections, the issuer's keys fetched once.
        for i in range(20):
            for svc, hdrs in services.values():
                await write(http, svc, hdrs, i)
                await recall_session(http, svc, hdrs, i)
        ops_by_name: dict[str, Op] = {
            "write": write,
            "recall (session, window)": recall_session,
            "recall (agent, long-term)": recall_agent,
        }
        for name, op in ops_by_name.items():
            latencies: dict[str, list[float]] = {k: [] for k in services}
            for i in range(ops):
                # Rotate which service goes first: each takes every place in turn, so none
                # is always the warm one (with three, reversing left the middle one never
                # following itself and the other two doing so every other round).
                names = list(services)
                order = names[i % len(names) :] + names[: i % len(names)]
                for key in order:
                    svc, hdrs = services[key]
                    started = time.perf_counter()
                    await op(http, svc, hdrs, i)
                    latencies[key].append(time.perf_counter() - started)
            row: dict[str, Any] = {"op": name}
            for key, values in latencies.items():
                row[f"{key}_p50"] = percentile(values, 0.50) * 1000
                row[f"{key}_p99"] = percentile(values, 0.99) * 1000
            rows.append(row)
    return rows


def run(model_url: str, dims: int, ops: int) -> list[dict[str, Any]]:
    """Both services on ``model_url``; one row per operation."""
    root = Path(tempfile.mkdtemp(prefix="kaos-bench-auth-"))
    issuer = DevIssuer(root / "issuer").start()
    started: list[ServiceProcess] = []
    try:
        callers = root / "callers.json"
        entry = {"identity": IDENTITY, "namespace": NAMESPACE, "serviceAccount": AGENT}
        callers.write_text(json.dumps({"callers": [entry]}))
        token = issuer.mint(NAMESPACE, AGENT, names.MEMORY_AUDIENCE)
        off = start_memory("off", root, model_url, dims, {})
        started.append(off)
        jwks = start_memory(
            "jwks",
            root,
            model_url,
            dims,
            {
                names.MEMORY_AUTH_MODE: "jwks",
                names.MEMORY_AUTH_ISSUER: issuer.url,
                names.MEMORY_AUTH_CA_FILE: str(issuer.ca_file),
                names.MEMORY_CALLERS_FILE: str(callers),
            },
        )
        started.append(jwks)
        common = {"X-Principal": "alice", "X-Session-Id": "bench-session"}
        services = {
            "off": (off, {**common, "X-Agent-Identity": IDENTITY}),
            "jwks": (jwks, {**common, wire.AGENT_TOKEN_HEADER: token}),
        }
        return asyncio.run(measure(services, ops))
    finally:
        for svc in reversed(started):
            svc.stop(timeout=30)
        issuer.stop()
        shutil.rmtree(root, ignore_errors=True)


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'operation':<27}{'off p50':>9}{'off p99':>9}{'jwks p50':>10}{'jwks p99':>10}"
        f"{'added p50':>11}"
    )
    print("verified agent identity: the same calls with token verification off and on (jwks)")
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r['op']:<27}{r['off_p50']:>9.2f}{r['off_p99']:>9.2f}{r['jwks_p50']:>10.2f}"
            f"{r['jwks_p99']:>10.2f}{r['jwks_p50'] - r['off_p50']:>+11.2f}"
        )
    print("(latencies in ms; added p50 = jwks p50 - off p50; keys cached after the first call)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=500, help="requests per operation and side")
    parser.add_argument("--dims", type=int, default=64, help="embedding dimension")
    args = parser.parse_args()
    with devmodel(args.dims) as model:
        print_table(run(f"{model.url}/v1", args.dims, args.ops))


if __name__ == "__main__":
    main()
