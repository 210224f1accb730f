"""Operator benchmark: create many Agents and MemoryStores, time until the operator has
made every desired object and every Agent is Ready, then measure it at rest.

    hack/bench/operator [--sizes 200,1000] [--agents-per-store 10] [--quiet 30]

Needs a cluster (``KUBECONFIG``, e.g. from ``eval "$(hack/test-cluster up)"``). For each
size it installs the CRDs, runs ``kaos-operator`` as a subprocess on a fresh namespace
(a fresh process per size, so its memory is that size's), and deletes the namespace
afterwards, waiting until it is gone before the next size. Figures per size:

- seconds from the first create until every Deployment, Service and PVC exists, and
  until every Agent is Ready (kwok makes pods Ready);
- API requests per object (custom resources plus the objects made for them) during
  that bring-up, and in steady state: over a quiet window (``--quiet``) after Ready in
  which nothing changes;
- the operator's resident memory (VmRSS and its peak VmHWM, from /proc) at rest;
- the CPU each process used from the first create until Ready: the test cluster's
  control plane (when it runs on this machine), the operator and the bench, in seconds
  and cores (where the bring-up's time went on a machine they share);
- the floor (``operator_floor``): the objects the operator made, created again in a fresh
  namespace with no operator, and the seconds until every Deployment is available: the
  cluster's own share of the bring-up (``--no-floor`` skips it);
- the latency of one change: one Agent's instructions patched while the others sit
  still, until its Deployment carries them (seen through a watch), over ``--changes``
  Agents one after another.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchlib import CONTROL_PLANE, CpuShare, processes_named  # noqa: E402
from kaos_core import agent_env as names  # noqa: E402
from kaos_operator.kube import (  # noqa: E402
    DEPLOYMENTS,
    NAMESPACES,
    OWNED_TYPES,
    KubeClient,
    Obj,
)
from kaos_operator.watch import Informer  # noqa: E402
from operator_floor import (  # noqa: E402
    NODES,
    Floor,
    available,
    bring_up,
    deleted,
    kwok_node,
    wait_for,
)

from tests.e2e.operator.helpers import (  # noqa: E402
    RT_OF,
    body,
    proxy_api,
    store_spec,
    volume_for,
)
from tests.fixtures.operator import install_crds  # noqa: E402
from tests.support.procs import console_script, free_port, start_service  # noqa: E402

SELECTOR = "app.kubernetes.io/managed-by=kaos-operator"
CONCURRENCY = 16  # creates in flight, of custom resources and of the floor's objects


def parse_metrics(text: str) -> dict[str, float]:
    """API requests by ``"<verb> <code>"`` and reconcile totals from /metrics text."""
    out: dict[str, float] = {}
    for m in re.finditer(
        r'^kaos_operator_api_requests_total\{code="(\d+)",verb="(\w+)"\} (\S+)$', text, re.M
    ):
        key = f"{m.group(2)} {m.group(1)}"
        out[key] = out.get(key, 0) + float(m.group(3))
    for name in ("kaos_operator_reconciles_total", "kaos_operator_reconcile_errors_total"):
        out[name] = sum(float(v) for v in re.findall(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.M))
    depth = re.search(r"^kaos_operator_queue_depth (\S+)$", text, re.M)
    out["kaos_operator_queue_depth"] = float(depth.group(1)) if depth else 0.0
    return out


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        return parse_metrics(resp.read().decode())


def requests_between(before: dict[str, float], after: dict[str, float]) -> dict[str, int]:
    """API requests made between two scrapes, by ``"<verb> <code>"`` (zeros left out)."""
    delta = {k: int(after.get(k, 0) - before.get(k, 0)) for k in after if " " in k}
    return {k: v for k, v in sorted(delta.items()) if v}


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak) of ``pid`` in KiB, from /proc."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def instructions_of(dep: Obj) -> str | None:
    containers = dep["spec"]["template"]["spec"].get("containers") or [{}]
    for env in containers[0].get("env") or []:
        if env.get("name") == names.AGENT_INSTRUCTIONS:
            return str(env.get("value"))
    return None


@dataclass
class Result:
    agents: int
    stores: int
    objects: int
    all_objects_s: float | None = None
    ready_s: float | None = None
    bringup: dict[str, int] = field(default_factory=dict)
    steady: dict[str, int] = field(default_factory=dict)
    quiet_s: float = 0.0
    rss_kib: dict[str, int] = field(default_factory=dict)
    changes_s: list[float] = field(default_factory=list)
    # Each process's CPU from the first create until every Agent was Ready.
    cpu: str = ""
    reconciles: int = 0
    errors: int = 0
    # What the operator made, for the floor (the same objects with no operator).
    made: list[Obj] = field(default_factory=list)
    floor: Floor | None = None


class Watched:
    """The bench's own view of the namespace, kept by watches (no polling of the API)."""

    def __init__(self, kube: KubeClient, ns: str) -> None:
        self.agents = Informer(kube, RT_OF["Agent"], namespace=ns)
        self.owned = [
            Informer(kube, rt, namespace=ns, label_selector=SELECTOR) for rt in OWNED_TYPES
        ]
        self.deployments = next(i for i in self.owned if i.rt == DEPLOYMENTS)
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        infs = [self.agents, *self.owned]
        self._tasks = [asyncio.create_task(i.run()) for i in infs]
        await asyncio.gather(*(i.synced.wait() for i in infs))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def objects(self) -> int:
        return sum(len(i.cache) for i in self.owned)

    def available(self) -> int:
        return available(self.deployments)

    async def timeline(self, started: float, every: float, metrics_url: str) -> None:
        """A progress line every ``every`` seconds (where the time goes): what the cluster
        holds, and the operator's work queue and reconciles so far."""
        while True:
            await asyncio.sleep(every)  # the timeline's period
            now = await asyncio.to_thread(scrape, metrics_url)
            print(
                f"  t={time.monotonic() - started:5.1f}s objects={self.objects()}"
                f" deployments available={self.available()}/{len(self.deployments.cache)}"
                f" agents Ready={self.ready()}"
                f" queue={now.get('kaos_operator_queue_depth', 0):.0f}"
                f" reconciles={now.get('kaos_operator_reconciles_total', 0):.0f}",
                flush=True,
            )

    def ready(self) -> int:
        return sum(
            1 for a in self.agents.cache.values() if (a.get("status") or {}).get("phase") == "Ready"
        )


async def change_latency(kube: KubeClient, ns: str, seen: Watched, name: str) -> float | None:
    """Seconds from patching Agent ``name``'s instructions until its Deployment has them."""
    text = f"changed {uuid.uuid4().hex[:8]}"
    patch = {"spec": {"config": {"instructions": text}}}
    started = time.monotonic()
    await kube.request(
        "PATCH",
        RT_OF["Agent"].path(ns, name),
        body=patch,
        content_type="application/merge-patch+json",
    )

    def done() -> bool:
        dep = seen.deployments.get(ns, name)
        return dep is not None and instructions_of(dep) == text

    return await wait_for(done, started, 30)


async def run_size(
    kube: KubeClient, kubeconfig: str, args: argparse.Namespace, agents: int
) -> Result:
    stores = max(1, agents // args.agents_per_store)
    # Per Agent: Deployment + Service; per (local) store: Deployment, Service, PVC; the
    # ModelAPI: Deployment, Service, ConfigMap.
    expected = 2 * agents + 3 * stores + 3
    result = Result(agents, stores, objects=expected + agents + stores + 1)
    ns = f"kaos-bench-{uuid.uuid4().hex[:6]}"
    await kube.create(
        NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    node = f"{ns}-node"
    await kube.create(NODES, None, kwok_node(node, agents + stores + 10))
    port = free_port()
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="kaos-operator-bench-"))
    env = {
        "KUBECONFIG": kubeconfig,
        "KAOS_OPERATOR_WATCH_NAMESPACE": ns,
        "KAOS_OPERATOR_NAMESPACE": ns,
        "KAOS_OPERATOR_HOST": "127.0.0.1",
        "KAOS_OPERATOR_PORT": str(port),
        "KAOS_OPERATOR_LOG_LEVEL": "WARNING",
    }
    if args.workers:
        env["KAOS_OPERATOR_WORKERS"] = str(args.workers)
    argv = [console_script("kaos-operator")]
    if args.profile:
        argv = [sys.executable, "-m", "cProfile", "-o", f"{args.profile}.{agents}"]
        argv += ["-m", "kaos_operator"]
    proc = start_service(
        f"kaos-operator-bench-{agents}",
        argv,
        port=port,
        env=env,
        log_dir=log_dir,
    )
    seen = Watched(kube, ns)
    try:
        await seen.start()
        sem = asyncio.Semaphore(CONCURRENCY)

        async def make(kind: str, name: str, spec: dict[str, Any]) -> None:
            async with sem:
                await kube.create(RT_OF[kind], ns, body(kind, name, spec))

        # The test cluster has no volume provisioner: one static volume per store's claim.
        await asyncio.gather(*(volume_for(kube, ns, f"mem-{i}-data") for i in range(stores)))
        before = scrape(proc.url)
        cpu = CpuShare(
            {**processes_named(CONTROL_PLANE), proc.proc.pid: "operator", os.getpid(): "bench"}
        )
        cpu.start()
        started = time.monotonic()
        progress = (
            asyncio.create_task(seen.timeline(started, args.timeline, proc.url))
            if args.timeline
            else None
        )
        await make("ModelAPI", "llm", proxy_api())
        await asyncio.gather(
            *(make("MemoryStore", f"mem-{i}", store_spec()) for i in range(stores))
        )
        memory = {"type": "remote", "memoryStore": ""}
        await asyncio.gather(
            *(
                make(
                    "Agent",
                    f"agent-{i}",
                    {
                        "modelAPI": "llm",
                        "config": {"memory": {**memory, "memoryStore": f"mem-{i % stores}"}},
                    },
                )
                for i in range(agents)
            )
        )
        result.all_objects_s = await wait_for(
            lambda: seen.objects() >= expected, started, args.timeout
        )
        result.ready_s = await wait_for(lambda: seen.ready() >= agents, started, args.timeout)
        cpu.stop()
        result.cpu = cpu.line()
        at_ready = scrape(proc.url)
        if progress is not None:
            progress.cancel()
        result.bringup = requests_between(before, at_ready)
        result.reconciles = int(
            at_ready["kaos_operator_reconciles_total"]
            - before.get("kaos_operator_reconciles_total", 0)
        )
        result.errors = int(at_ready["kaos_operator_reconcile_errors_total"])
        # Steady state: nothing changes; what the operator asks of the API server now is
        # its cost of keeping a settled cluster (watches, lease renewals, rechecks).
        quiet_started = time.monotonic()
        await asyncio.sleep(args.quiet)  # the measured quiet window itself
        result.quiet_s = time.monotonic() - quiet_started
        result.steady = requests_between(at_ready, scrape(proc.url))
        result.rss_kib = memory_kib(proc.proc.pid)
        for i in range(args.changes):
            latency = await change_latency(kube, ns, seen, f"agent-{(i * 7919) % agents}")
            if latency is not None:
                result.changes_s.append(latency)
        result.made = [o for informer in seen.owned for o in informer.cache.values()]
        return result
    finally:
        await seen.stop()
        proc.stop()
        await deleted(kube, ns, node, args.timeout)


def per_object(requests: dict[str, int], objects: int) -> float:
    return sum(requests.values()) / objects if objects else 0.0


def report(r: Result) -> list[str]:
    def secs(v: float | None) -> str:
        return f"{v:.1f}s" if v is not None else "timed out"

    def verbs(reqs: dict[str, int]) -> str:
        return ", ".join(f"{k}: {v}" for k, v in reqs.items()) or "none"

    lines = [
        f"== {r.agents} Agents, {r.stores} MemoryStores ({r.objects} objects)",
        f"all desired objects exist after {secs(r.all_objects_s)}",
        f"all Agents Ready after {secs(r.ready_s)}",
        f"bring-up API requests: {sum(r.bringup.values())}"
        f" ({per_object(r.bringup, r.objects):.2f}/object; {verbs(r.bringup)})",
        f"steady-state API requests over {r.quiet_s:.0f}s: {sum(r.steady.values())}"
        f" ({per_object(r.steady, r.objects):.3f}/object; {verbs(r.steady)})",
        f"operator memory: RSS {r.rss_kib.get('VmRSS', 0) / 1024:.0f} MB,"
        f" peak {r.rss_kib.get('VmHWM', 0) / 1024:.0f} MB",
        f"reconciles: {r.reconciles}, errors: {r.errors}",
        f"bring-up {r.cpu}",
    ]
    if r.floor is not None:
        lines.append(
            f"floor: the operator's {r.floor.objects} objects created directly, no operator:"
            f" all {r.floor.deployments} Deployments available after"
            f" {secs(r.floor.available_s)}"
        )
    if r.changes_s:
        lines.append(
            f"one changed Agent reconciled (patch to Deployment): median"
            f" {statistics.median(r.changes_s) * 1000:.0f} ms, max {max(r.changes_s) * 1000:.0f} ms"
            f" over {len(r.changes_s)}"
        )
    return lines


def table(results: list[Result]) -> list[str]:
    head = (
        "| Agents | stores | objects | Ready | floor | bring-up req/obj | steady req/obj"
        " | RSS (peak) MB | change ms (max) |"
    )
    rows = [head, "|" + "---|" * 9]
    for r in results:
        change = (
            f"{statistics.median(r.changes_s) * 1000:.0f} ({max(r.changes_s) * 1000:.0f})"
            if r.changes_s
            else "-"
        )
        ready = f"{r.ready_s:.1f}s" if r.ready_s is not None else "timed out"
        floor = "-"
        if r.floor is not None:
            floor = f"{r.floor.available_s:.1f}s" if r.floor.available_s else "timed out"
        rows.append(
            f"| {r.agents} | {r.stores} | {r.objects} | {ready} | {floor}"
            f" | {per_object(r.bringup, r.objects):.2f} | {per_object(r.steady, r.objects):.3f}"
            f" | {r.rss_kib.get('VmRSS', 0) / 1024:.0f} ({r.rss_kib.get('VmHWM', 0) / 1024:.0f})"
            f" | {change} |"
        )
    return rows


async def bench(args: argparse.Namespace) -> int:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:
        print('KUBECONFIG is not set: run eval "$(hack/test-cluster up)" first', file=sys.stderr)
        return 2
    if not args.no_crds:
        await install_crds(Path(kubeconfig))
    kube = await KubeClient.connect(kubeconfig)
    results = []
    try:
        for agents in args.sizes:
            result = await run_size(kube, kubeconfig, args, agents)
            if not args.no_floor:
                result.floor = await bring_up(
                    kube, result.made, concurrency=CONCURRENCY, within=args.timeout
                )
            print("\n".join(report(result)), flush=True)
            results.append(result)
    finally:
        await kube.close()
    print("\n".join(table(results)))
    return 0 if all(r.ready_s is not None for r in results) else 1


def sizes(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("sizes are Agent counts separated by commas") from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError("sizes are positive Agent counts, e.g. 200,1000")
    return values


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", type=sizes, default=[200], help="Agent counts, e.g. 200,1000")
    parser.add_argument("--agents-per-store", type=int, default=10)
    parser.add_argument("--workers", type=int, default=0, help="0: the operator's default")
    parser.add_argument("--quiet", type=float, default=30, help="seconds of the steady window")
    parser.add_argument("--changes", type=int, default=5, help="single-Agent changes timed")
    parser.add_argument(
        "--no-crds", action="store_true", help="the cluster has the CRDs: do not install them"
    )
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the floor: the operator's objects created again directly, with no operator",
    )
    parser.add_argument("--profile", help="run the operator under cProfile: stats to PATH.<size>")
    parser.add_argument("--timeline", type=float, default=0, help="progress every N s")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--log-dir", default=None)
    return asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
