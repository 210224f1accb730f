"""Helpers for operator integration tests: typed resource types, bodies, polling."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kaos_core.crds import Agent, MCPServer, MemoryStore, ModelAPI
from kaos_operator.kube import (
    CONFIGMAPS,
    DEPLOYMENTS,
    OWNED_TYPES,
    KubeClient,
    Obj,
    ResourceType,
)

T = TypeVar("T")

AGENTS = ResourceType.of_kind(Agent.info)
MODELAPIS = ResourceType.of_kind(ModelAPI.info)
MCPSERVERS = ResourceType.of_kind(MCPServer.info)
MEMORYSTORES = ResourceType.of_kind(MemoryStore.info)
RT_OF = {
    "Agent": AGENTS,
    "ModelAPI": MODELAPIS,
    "MCPServer": MCPSERVERS,
    "MemoryStore": MEMORYSTORES,
}
POLL = 0.1  # seconds between polls of a deadline wait


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, within: float = 60, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with its last answer."""
    deadline = asyncio.get_running_loop().time() + within
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(POLL)


def body(kind: str, name: str, spec: dict[str, Any]) -> Obj:
    return {
        "apiVersion": "kaos.tools/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


async def create(kube: KubeClient, ns: str, kind: str, name: str, spec: dict[str, Any]) -> Obj:
    return await kube.create(RT_OF[kind], ns, body(kind, name, spec))


def proxy_api(models: list[str] | None = None) -> dict[str, Any]:
    return {"mode": "Proxy", "proxyConfig": {"models": models or ["openai/small"]}}


def store_spec(**extra: Any) -> dict[str, Any]:
    models = {"summarization": {"modelAPI": "llm"}, "embedding": {"modelAPI": "llm"}}
    return {"models": models, **extra}


def condition(obj: Obj | None, type_: str) -> dict[str, Any] | None:
    for c in (obj or {}).get("status", {}).get("conditions", []) or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def phase(obj: Obj | None) -> str | None:
    value = (obj or {}).get("status", {}).get("phase")
    return str(value) if value is not None else None


async def wait_phase(
    kube: KubeClient, ns: str, kind: str, name: str, want: str, within: float = 60
) -> Obj:
    async def probe() -> Obj | None:
        obj = await kube.get(RT_OF[kind], ns, name)
        return obj if phase(obj) == want else None

    return await eventually(probe, within=within, what=f"{kind} {name} phase {want}")


async def managed_objects(kube: KubeClient, ns: str) -> set[tuple[str, str]]:
    """(kind, name) of every object the operator manages in ``ns``."""
    out: set[tuple[str, str]] = set()
    for rt in OWNED_TYPES:
        doc = await kube.list(rt, ns, label_selector="app.kubernetes.io/managed-by=kaos-operator")
        out.update((rt.kind, item["metadata"]["name"]) for item in doc.get("items", []))
    return out


def container_env(dep: Obj) -> dict[str, Any]:
    container = dep["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


async def deployment(kube: KubeClient, ns: str, name: str) -> Obj | None:
    return await kube.get(DEPLOYMENTS, ns, name)


__all__ = ["CONFIGMAPS", "DEPLOYMENTS"]


PVS = ResourceType("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)


async def volume_for(kube: KubeClient, ns: str, claim: str, size: str = "1Gi") -> str:
    """A PersistentVolume pre-bound to ``ns/claim``.

    The test cluster has no provisioner (kwok runs no storage), so a local MemoryStore's
    claim would stay Pending and its pod unscheduled; a static volume stands in for one.
    """
    name = f"pv-{uuid.uuid4().hex[:10]}"
    await kube.create(
        PVS,
        None,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": {"kaos.tools/test-namespace": ns}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Delete",
                "hostPath": {"path": f"/tmp/{name}"},
                "claimRef": {"namespace": ns, "name": claim},
            },
        },
    )
    return name


async def delete_volumes(kube: KubeClient, ns: str) -> None:
    """Delete the volumes ``volume_for`` made for ``ns`` (volumes outlive namespaces)."""
    doc = await kube.list(PVS, None, label_selector=f"kaos.tools/test-namespace={ns}")
    for item in doc.get("items", []):
        await kube.delete(PVS, None, item["metadata"]["name"])
