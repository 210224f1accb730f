"""Operator benchmark: create many Agents and MemoryStores, time until the operator has
made every desired object, and count the API requests it made on the way.

    hack/bench/operator [--agents 200] [--stores 20] [--no-ready]

Needs a cluster (``KUBECONFIG``, e.g. from ``eval "$(hack/test-cluster up)"``). It
installs the CRDs, runs ``kaos-operator`` as a subprocess on a fresh namespace, and
deletes the namespace afterwards. Figures: seconds until every Deployment, Service and
PVC exists; seconds until every Agent is Ready (kwok makes pods Ready); the operator's
API requests by verb, read from its /metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kaos_operator.kube import NAMESPACES, OWNED_TYPES, KubeClient, ResourceType  # noqa: E402

from tests.e2e.operator.helpers import (  # noqa: E402
    RT_OF,
    body,
    delete_volumes,
    proxy_api,
    store_spec,
    volume_for,
)
from tests.fixtures.operator import install_crds  # noqa: E402
from tests.support.cluster import KWOK_NODE_ANNOTATION  # noqa: E402
from tests.support.procs import console_script, free_port, start_service  # noqa: E402

SELECTOR = "app.kubernetes.io/managed-by=kaos-operator"
NODES = ResourceType("", "v1", "nodes", "Node", namespaced=False)


def bench_node(name: str, pods: int) -> dict[str, Any]:
    """A kwok-simulated node with room for the benchmark's pods (removed afterwards)."""
    key, value = KWOK_NODE_ANNOTATION
    capacity = {"cpu": "64", "memory": "512Gi", "pods": str(pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value},
            "labels": {"kubernetes.io/hostname": name, "type": "kwok"},
        },
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for m in re.finditer(
        r'^kaos_operator_api_requests_total\{code="(\d+)",verb="(\w+)"\} (\S+)$', text, re.M
    ):
        out[f"{m.group(2)} {m.group(1)}"] = out.get(f"{m.group(2)} {m.group(1)}", 0) + float(
            m.group(3)
        )
    for name in ("kaos_operator_reconciles_total", "kaos_operator_reconcile_errors_total"):
        total = sum(float(v) for v in re.findall(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.M))
        out[name] = total
    return out


async def count_objects(kube: KubeClient, ns: str) -> int:
    total = 0
    for rt in OWNED_TYPES:
        doc = await kube.list(rt, ns, label_selector=SELECTOR)
        total += len(doc.get("items", []))
    return total


async def ready_agents(kube: KubeClient, ns: str) -> int:
    doc = await kube.list(RT_OF["Agent"], ns)
    return sum(1 for a in doc.get("items", []) if (a.get("status") or {}).get("phase") == "Ready")


async def bench(args: argparse.Namespace) -> int:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        print('KUBECONFIG is not set: run eval "$(hack/test-cluster up)" first', file=sys.stderr)
        return 2
    await install_crds(Path(kubeconfig))
    kube = await KubeClient.connect(kubeconfig)
    ns = f"kaos-bench-{uuid.uuid4().hex[:6]}"
    await kube.create(
        NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    port = free_port()
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="kaos-operator-bench-"))
    proc = start_service(
        "kaos-operator-bench",
        [console_script("kaos-operator")],
        port=port,
        env={
            "KUBECONFIG": kubeconfig,
            "KAOS_OPERATOR_WATCH_NAMESPACE": ns,
            "KAOS_OPERATOR_NAMESPACE": ns,
            "KAOS_OPERATOR_HOST": "127.0.0.1",
            "KAOS_OPERATOR_PORT": str(port),
            "KAOS_OPERATOR_WORKERS": str(args.workers),
            "KAOS_OPERATOR_LOG_LEVEL": "WARNING",
        },
        log_dir=log_dir,
    )
    try:
        before = scrape(proc.url)
        sem = asyncio.Semaphore(16)

        async def make(kind: str, name: str, spec: dict[str, Any]) -> None:
            async with sem:
                await kube.create(RT_OF[kind], ns, body(kind, name, spec))

        node = f"{ns}-node"
        await kube.create(NODES, None, bench_node(node, args.agents + args.stores + 10))
        # The test cluster has no volume provisioner: one static volume per store's claim.
        await asyncio.gather(*(volume_for(kube, ns, f"mem-{i}-data") for i in range(args.stores)))
        started = time.monotonic()
        await make("ModelAPI", "llm", proxy_api())
        await asyncio.gather(
            *(make("MemoryStore", f"mem-{i}", store_spec()) for i in range(args.stores))
        )
        await asyncio.gather(
            *(
                make(
                    "Agent",
                    f"agent-{i}",
                    {
                        "modelAPI": "llm",
                        "config": {
                            "memory": {"type": "remote", "memoryStore": f"mem-{i % args.stores}"}
                        },
                    },
                )
                for i in range(args.agents)
            )
        )
        created = time.monotonic() - started
        # Per Agent: Deployment + Service; per store (local): Deployment, Service, PVC;
        # the ModelAPI: Deployment, Service, ConfigMap.
        expected = 2 * args.agents + 3 * args.stores + 3
        while await count_objects(kube, ns) < expected:
            if time.monotonic() - started > args.timeout:
                print(f"timed out with {await count_objects(kube, ns)}/{expected} objects")
                return 1
            await asyncio.sleep(0.25)  # poll interval
        all_objects = time.monotonic() - started
        ready_s = None
        if not args.no_ready:
            while await ready_agents(kube, ns) < args.agents:
                if time.monotonic() - started > args.timeout:
                    break
                await asyncio.sleep(0.5)  # poll interval
            else:
                ready_s = time.monotonic() - started
        after = scrape(proc.url)
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        requests = {k: int(v) for k, v in sorted(delta.items()) if " " in k and v}
        print(f"agents={args.agents} stores={args.stores} workers={args.workers}")
        print(f"resources created by the client in {created:.1f}s")
        print(f"all {expected} desired objects exist after {all_objects:.1f}s")
        if ready_s is not None:
            print(f"all {args.agents} Agents Ready after {ready_s:.1f}s")
        print(
            f"operator API requests: {sum(requests.values())} "
            + ", ".join(f"{k}: {v}" for k, v in requests.items())
        )
        print(
            f"reconciles: {int(delta.get('kaos_operator_reconciles_total', 0))}, "
            f"errors: {int(delta.get('kaos_operator_reconcile_errors_total', 0))}"
        )
        return 0
    finally:
        proc.stop()
        await kube.delete(NAMESPACES, None, ns)
        await delete_volumes(kube, ns)
        await kube.delete(NODES, None, f"{ns}-node")
        await kube.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--stores", type=int, default=20)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--no-ready", action="store_true", help="skip waiting for Ready")
    parser.add_argument("--log-dir", default=None)
    return asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
