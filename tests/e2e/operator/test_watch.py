"""Informers against the real API server: events arrive, a too-old version relists."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from kaos_operator.kube import CONFIGMAPS, Gone, KubeClient, Obj
from kaos_operator.watch import Informer

from tests.e2e.operator.helpers import eventually

pytestmark = pytest.mark.cluster


def config_map(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}


async def history_compacted(kube: KubeClient, ns: str) -> bool:
    """Whether resourceVersion 1 is gone (etcd compacted since the cluster started)."""
    try:
        async for _ in kube.watch(CONFIGMAPS, ns, resource_version="1", timeout_seconds=1):
            pass
    except Gone:
        return True
    return False


@contextlib.asynccontextmanager
async def running(inf: Informer) -> AsyncIterator[Informer]:
    task = asyncio.create_task(inf.run())
    try:
        yield inf
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_informer_lists_then_follows(kube: KubeClient, k8s_namespace: str) -> None:
    ns = k8s_namespace
    await kube.create(CONFIGMAPS, ns, config_map("before"))
    events: list[tuple[str, str]] = []
    inf = Informer(
        kube,
        CONFIGMAPS,
        namespace=ns,
        on_event=lambda k, o: events.append((k, o["metadata"]["name"])),
    )
    async with running(inf):
        await asyncio.wait_for(inf.synced.wait(), timeout=30)
        assert ("ADDED", "before") in events
        await kube.create(CONFIGMAPS, ns, config_map("after"))

        async def seen() -> bool:
            return ("ADDED", "after") in events and inf.get(ns, "after") is not None

        await eventually(seen, within=30, what="the watch event of a new ConfigMap")
        await kube.delete(CONFIGMAPS, ns, "before")

        async def deleted() -> bool:
            return ("DELETED", "before") in events and inf.get(ns, "before") is None

        await eventually(deleted, within=30, what="the watch event of a deletion")
        assert inf.relists == 0


async def test_informer_relists_after_gone(kube: KubeClient, k8s_namespace: str) -> None:
    ns = k8s_namespace
    if not await history_compacted(kube, ns):
        pytest.skip(
            "etcd has not compacted yet (the API server compacts every 5 minutes), so no "
            "resourceVersion is too old to watch from: nothing answers 410 on this cluster"
        )
    await kube.create(CONFIGMAPS, ns, config_map("before"))
    events: list[tuple[str, str]] = []
    # Resuming from a compacted version: the watch answers 410 and the informer lists.
    inf = Informer(
        kube,
        CONFIGMAPS,
        namespace=ns,
        resource_version="1",
        on_event=lambda k, o: events.append((k, o["metadata"]["name"])),
    )
    async with running(inf):
        await asyncio.wait_for(inf.synced.wait(), timeout=30)
        assert inf.relists == 1
        assert ("ADDED", "before") in events
