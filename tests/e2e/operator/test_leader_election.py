"""Of two operator processes only the Lease holder reconciles; killing it hands over."""

from __future__ import annotations

import asyncio
import re
import signal
import time
import urllib.request

import pytest
from kaos_operator.kube import LEASES, KubeClient

from tests.e2e.operator.helpers import create, eventually, proxy_api, wait_phase
from tests.fixtures.operator import OperatorFactory
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster


def metric(proc: ServiceProcess, name: str) -> float:
    """Sum of every sample of ``name`` on the process's /metrics."""
    with urllib.request.urlopen(f"{proc.url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    pattern = re.compile(rf"^{re.escape(name)}(\{{[^}}]*\}})? ([0-9.e+-]+)$", re.M)
    return sum(float(m.group(2)) for m in pattern.finditer(text))


async def test_only_the_leader_reconciles_and_a_kill_hands_over(
    kube: KubeClient, k8s_namespace: str, operator_factory: OperatorFactory
) -> None:
    ns = k8s_namespace
    first = operator_factory("op-a")
    second = operator_factory("op-b")
    procs = {"op-a": first, "op-b": second}

    async def holder() -> str | None:
        lease = await kube.get(LEASES, ns, "kaos-operator")
        return ((lease or {}).get("spec") or {}).get("holderIdentity")

    leader_id = await eventually(holder, within=30, what="a lease holder")
    leader = procs[leader_id]
    standby_id = next(i for i in procs if i != leader_id)
    standby = procs[standby_id]

    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await wait_phase(kube, ns, "ModelAPI", "llm", "Ready", within=60)
    leader_reconciles = await asyncio.to_thread(metric, leader, "kaos_operator_reconciles_total")
    standby_reconciles = await asyncio.to_thread(metric, standby, "kaos_operator_reconciles_total")
    assert leader_reconciles > 0
    assert standby_reconciles == 0
    assert await asyncio.to_thread(metric, leader, "kaos_operator_leader") == 1
    assert await asyncio.to_thread(metric, standby, "kaos_operator_leader") == 0

    killed_at = time.monotonic()
    leader.stop(signal.SIGKILL, timeout=10)

    async def taken_over() -> bool:
        return await holder() == standby_id

    await eventually(taken_over, within=30, what=f"{standby_id} to take the lease")
    takeover = time.monotonic() - killed_at
    # Lease 4 s + retry 0.5 s in the test settings (tests.fixtures.operator.FAST_LEASE).
    assert takeover < 15, takeover

    await create(kube, ns, "MCPServer", "tools", {"params": "def f() -> str:\n    return 'x'\n"})
    await wait_phase(kube, ns, "MCPServer", "tools", "Ready", within=60)
    assert await asyncio.to_thread(metric, standby, "kaos_operator_reconciles_total") > 0


async def test_graceful_stop_releases_the_lease(
    kube: KubeClient, k8s_namespace: str, operator_factory: OperatorFactory
) -> None:
    ns = k8s_namespace
    # A long lease: only an explicit release lets the standby in quickly.
    slow = {"KAOS_OPERATOR_LEASE_DURATION": "60", "KAOS_OPERATOR_RENEW_DEADLINE": "30"}
    first = operator_factory("op-a", **slow)

    async def holder() -> str | None:
        lease = await kube.get(LEASES, ns, "kaos-operator")
        return ((lease or {}).get("spec") or {}).get("holderIdentity")

    assert await eventually(holder, within=30, what="a lease holder") == "op-a"
    operator_factory("op-b", **slow)
    stopped_at = time.monotonic()
    assert first.stop(signal.SIGTERM, timeout=30) == 0

    async def b_leads() -> bool:
        return await holder() == "op-b"

    await eventually(b_leads, within=20, what="op-b to take the released lease")
    assert time.monotonic() - stopped_at < 20
