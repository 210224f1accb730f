"""The operator benchmark's floor: what the cluster alone takes to bring up the objects the
operator made, created directly, with no operator.

After a size's run the bench keeps what the operator made in its namespace (every
Deployment, Service, ConfigMap, claim, ServiceAccount, PodDisruptionBudget and
NetworkPolicy), stripped of what the API server and the controllers filled in, and creates
the same objects in a fresh namespace on a fresh kwok node, as many at a time as the bench
creates custom resources. The time until every Deployment is available is the cluster's
share of the bring-up (its controllers, scheduler, kwok and API server on the same
machine); the operator's own share is the difference to the Ready time beside it.
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kaos_operator.kube import (
    DEPLOYMENTS,
    NAMESPACES,
    PVCS,
    SERVICES,
    KubeClient,
    Obj,
    ResourceType,
    type_of,
)
from kaos_operator.watch import Informer

from tests.e2e.operator.helpers import delete_volumes, volume_for
from tests.support.cluster import KWOK_NODE_ANNOTATION

NODES = ResourceType("", "v1", "nodes", "Node", namespaced=False)
POLL = 0.2  # seconds between looks at the bench's own watch caches

# Set by the API server or a controller on the objects the operator made; sent again they
# would be refused (uid, resourceVersion, a Service's address) or bind the copy to the
# original (owner references, a claim's volume).
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "ownerReferences",
    "namespace",
    "finalizers",
)
_SERVER_ANNOTATIONS = ("pv.kubernetes.io/", "deployment.kubernetes.io/", "volume.")


def kwok_node(name: str, pods: int) -> dict[str, Any]:
    """A kwok-simulated node with room for ``pods`` (the bench removes it afterwards)."""
    key, value = KWOK_NODE_ANNOTATION
    capacity = {"cpu": "256", "memory": "2048Gi", "pods": str(pods)}
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


def available(deployments: Informer) -> int:
    return sum(
        1 for d in deployments.cache.values() if (d.get("status") or {}).get("availableReplicas")
    )


async def wait_for(probe: Callable[[], bool], started: float, within: float) -> float | None:
    """Seconds from ``started`` until ``probe()`` holds; None when ``within`` passes first."""
    while not probe():
        if time.monotonic() - started > within:
            return None
        await asyncio.sleep(POLL)
    return time.monotonic() - started


async def deleted(kube: KubeClient, ns: str, node: str, within: float) -> None:
    """Delete ``ns``, its volumes and its node, and wait until the namespace is gone: the
    next measurement must not share the machine with this one's garbage collection."""
    await kube.delete(NAMESPACES, None, ns)
    await delete_volumes(kube, ns)
    await kube.delete(NODES, None, node)
    for _ in range(int(within)):
        if await kube.get(NAMESPACES, None, ns) is None:
            break
        await asyncio.sleep(1)  # poll interval of the namespace's deletion


@dataclass
class Floor:
    objects: int
    deployments: int
    available_s: float | None = None


def copyable(obj: Obj) -> Obj:
    """``obj`` as a client would first create it: no status, nothing the server set."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out["metadata"]
    for key in _SERVER_METADATA:
        meta.pop(key, None)
    notes = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if not k.startswith(_SERVER_ANNOTATIONS)
    }
    meta["annotations"] = notes
    spec = out.get("spec") or {}
    if type_of(out) == SERVICES:
        for key in ("clusterIP", "clusterIPs"):
            spec.pop(key, None)
    if type_of(out) == PVCS:
        spec.pop("volumeName", None)
    out.pop("secrets", None)  # a ServiceAccount's, from the token controller
    return out


async def bring_up(
    kube: KubeClient,
    objects: Iterable[Obj],
    *,
    concurrency: int,
    within: float,
) -> Floor:
    """Create ``objects`` in a fresh namespace and time until every Deployment among them
    is available; the namespace, its node and its volumes are deleted afterwards."""
    wanted = [copyable(o) for o in objects]
    deployments = [o for o in wanted if type_of(o) == DEPLOYMENTS]
    floor = Floor(objects=len(wanted), deployments=len(deployments))
    ns = f"kaos-floor-{uuid.uuid4().hex[:6]}"
    await kube.create(
        NAMESPACES, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    node = f"{ns}-node"
    await kube.create(NODES, None, kwok_node(node, len(wanted) + 10))
    # Watched, as the bench watches the operator's objects: listing a thousand Deployments
    # a few times a second would load the API server the floor is measuring.
    seen = Informer(kube, DEPLOYMENTS, namespace=ns)
    watching = asyncio.create_task(seen.run())
    try:
        await seen.synced.wait()
        claims = [o["metadata"]["name"] for o in wanted if type_of(o) == PVCS]
        await asyncio.gather(*(volume_for(kube, ns, claim) for claim in claims))
        sem = asyncio.Semaphore(concurrency)

        async def make(obj: Obj) -> None:
            async with sem:
                await kube.create(type_of(obj), ns, obj)

        started = time.monotonic()
        await asyncio.gather(*(make(o) for o in wanted))
        floor.available_s = await wait_for(
            lambda: available(seen) >= len(deployments), started, within
        )
        return floor
    finally:
        watching.cancel()
        await asyncio.gather(watching, return_exceptions=True)
        await deleted(kube, ns, node, within)
