"""The controller: informers feed one work queue whose workers run the reconcilers.

Custom resources and the objects the operator owns are all watched. A change to a
resource queues it and everything that depends on it (``RefIndex``); a change to an
owned object queues its controlling owner. Workers start only once every cache has
listed, so no reconcile mistakes "not cached yet" for "does not exist".

The controller is the reconcilers' ``ReconcileContext``: they read its caches and write
through it, and never see the controller itself. Each reconcile is a span ``reconcile
<Kind>`` with the object's kind, namespace, name and outcome; the API calls it makes are
its children (``kaos_core.tracing``'s client spans, when tracing is on).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import Any

from kaos_core.crds import Agent, MCPServer, MemoryStore, ModelAPI
from kaos_core.crds.common import CustomObject
from kaos_core.telemetry import conventions as otel
from kaos_core.telemetry import tracer
from opentelemetry.trace import StatusCode

from kaos_operator.apply import apply_all, controller_uid, prune
from kaos_operator.desired.common import MANAGED_BY_SELECTOR
from kaos_operator.events import EventRecorder
from kaos_operator.index import ObjKey, RefIndex
from kaos_operator.kube import (
    EVENTS,
    PODS,
    SCALEDOBJECTS,
    ApiError,
    KubeClient,
    Obj,
    ResourceType,
    owned_types,
)
from kaos_operator.metrics import OperatorMetrics
from kaos_operator.queue import Workers, WorkQueue
from kaos_operator.receipt_key import read_receipt_key
from kaos_operator.reconcilers import Reconciler, build_reconcilers
from kaos_operator.settings import OperatorSettings, ReconcileSettings
from kaos_operator.watch import Informer

log = logging.getLogger(__name__)
_TRACER = tracer(__name__)

KINDS: tuple[type[CustomObject], ...] = (Agent, ModelAPI, MCPServer, MemoryStore)


def dependencies_of(kind: str, obj: Obj) -> frozenset[ObjKey]:
    """References a resource makes to others, for the index."""
    ns = obj["metadata"].get("namespace", "")
    spec: dict[str, Any] = obj.get("spec") or {}
    deps: set[ObjKey] = set()
    if kind == "Agent":
        if spec.get("modelAPI"):
            deps.add(("ModelAPI", ns, spec["modelAPI"]))
        deps.update(("MCPServer", ns, n) for n in spec.get("mcpServers") or [])
        deps.update(("Agent", ns, n) for n in (spec.get("agentNetwork") or {}).get("access", []))
        store = ((spec.get("config") or {}).get("memory") or {}).get("memoryStore")
        if store:
            deps.add(("MemoryStore", ns, store))
    elif kind == "MemoryStore":
        for role in (spec.get("models") or {}).values():
            if isinstance(role, dict) and role.get("modelAPI"):
                deps.add(("ModelAPI", ns, role["modelAPI"]))
    return frozenset(deps)


class Controller:
    """One operator's informers, queue, workers and reconcilers."""

    def __init__(
        self, client: KubeClient, settings: OperatorSettings, metrics: OperatorMetrics
    ) -> None:
        self.client = client
        self.metrics = metrics
        self._settings = settings.reconcile
        self.recorder = EventRecorder(client, settings.leader.identity)
        queue = settings.queue
        self.queue = WorkQueue(backoff_base=queue.backoff_base, backoff_max=queue.backoff_max)
        self.index = RefIndex()
        # Last seen generation of each resource (security on: see _queue_referenced).
        self._generations: dict[ObjKey, object] = {}
        ns = settings.cluster.watch_namespace
        self.resources: dict[str, Informer] = {}
        for model in KINDS:
            kind = model.info.kind
            inf = Informer(client, ResourceType.of_kind(model.info), namespace=ns)
            inf.add_handler(self._resource_handler(kind))
            self.resources[kind] = inf
        self.owned: dict[str, Informer] = {}
        self._owned_by: dict[str, set[tuple[str, str, str]]] = {}
        self._owner_of: dict[tuple[str, str, str], str] = {}
        self._namespace = ns
        for rt in owned_types(settings.gateway_api.enabled):
            self._watch_owned(rt)
        self.reconcilers: dict[str, Reconciler[Any]] = build_reconcilers(
            self, workload_reader=self, receipt_key_reader=read_receipt_key
        )
        self.synced = False
        self._workers = Workers(self.queue, self._handle, queue.workers)
        metrics.queue_depth.set_function(lambda: self.queue.depth)

    def _watch_owned(self, rt: ResourceType) -> None:
        inf = Informer(
            self.client, rt, namespace=self._namespace, label_selector=MANAGED_BY_SELECTOR
        )
        inf.add_handler(self._owned_handler(rt))
        self.owned[rt.kind] = inf

    async def _discover(self) -> None:
        """What the cluster serves beyond the built-in kinds, once, before the informers
        start: KEDA's ScaledObjects (installed later, they are seen on the next start)."""
        if SCALEDOBJECTS.kind in self.owned:
            return
        try:
            served = await self.client.serves(SCALEDOBJECTS)
        except ApiError as exc:
            # Autoscaled Agents fall back to CPU (their status says hpa) rather than none
            # of them being reconciled.
            log.warning("could not tell whether the cluster serves KEDA: %s", exc.reason)
            return
        if not served:
            return
        log.info("the cluster serves KEDA ScaledObjects: autoscaled Agents get one")
        self._watch_owned(SCALEDOBJECTS)
        self._settings = replace(self._settings, keda_served=True)

    # -- events ----------------------------------------------------------------------

    def _resource_handler(self, kind: str) -> Any:
        def handle(event: str, obj: Obj) -> None:
            meta = obj["metadata"]
            key: ObjKey = (kind, meta.get("namespace", ""), meta["name"])
            before = self.index.dependencies(key)
            if event == "DELETED":
                self.index.remove(key)
            else:
                self.index.set(key, dependencies_of(kind, obj))
            self.queue.add(key)
            for dependent in self.index.dependents(key):
                self.queue.add(dependent)
            if self._settings.posture.security_enabled:
                self._queue_referenced(event, key, meta.get("generation"), before)

        return handle

    def _queue_referenced(
        self, event: str, key: ObjKey, generation: object, before: frozenset[ObjKey]
    ) -> None:
        """With security on, what a resource refers to depends on who refers to it (a
        store's callers file lists the Agents bound to it, an Agent's the Agents naming
        it in ``access``, every NetworkPolicy admits its referrers' pods). So a spec
        change of a referrer queues what it referred to before and what it refers to
        now: a revoked grant reaches the old target as surely as a new grant the new
        one. Status-only changes (same generation, same references) queue nothing.
        """
        after = self.index.dependencies(key)
        if event == "DELETED":
            self._generations.pop(key, None)
            changed = True
        else:
            seen = self._generations.get(key)
            self._generations[key] = generation
            changed = event == "ADDED" or seen != generation or before != after
        if changed:
            for ref in before | after:
                self.queue.add(ref)

    def _owned_handler(self, rt: ResourceType) -> Any:
        def handle(event: str, obj: Obj) -> None:
            meta = obj["metadata"]
            entry = (rt.kind, meta.get("namespace", ""), meta["name"])
            uid = controller_uid(obj)
            previous = self._owner_of.pop(entry, None)
            if previous is not None:
                self._owned_by.get(previous, set()).discard(entry)
            if uid is not None and event != "DELETED":
                self._owned_by.setdefault(uid, set()).add(entry)
                self._owner_of[entry] = uid
            for ref in meta.get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") in self.resources:
                    self.queue.add((ref["kind"], meta.get("namespace", ""), ref["name"]))

        return handle

    # -- the reconcilers' context ------------------------------------------------------

    @property
    def settings(self) -> ReconcileSettings:
        return self._settings

    def resource(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.resources[kind].get(namespace, name)

    def resources_in(self, kind: str, namespace: str) -> list[Obj]:
        return [obj for (ns, _), obj in self.resources[kind].cache.items() if ns == namespace]

    def live(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        return self.owned[rt.kind].get(namespace, name)

    def owned_objects(self, uid: str) -> list[tuple[ResourceType, Obj]]:
        out = []
        for kind, ns, name in sorted(self._owned_by.get(uid, ())):
            inf = self.owned[kind]
            obj = inf.get(ns, name)
            if obj is not None and controller_uid(obj) == uid:
                out.append((inf.rt, obj))
        return out

    async def apply(self, owner_uid: str, desired: Sequence[Obj]) -> None:
        await apply_all(self.client, desired, self.live)
        await prune(self.client, self.owned_objects(owner_uid), desired)

    async def write_status(self, rt: ResourceType, obj: Obj, status: Obj) -> None:
        meta = obj["metadata"]
        body: Obj = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
            "status": status,
        }
        await self.client.apply(body, rt=rt, sub="status")

    async def record_event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        await self.recorder.record(obj, type_, reason, message)

    def requeue(self, kind: str, namespace: str, name: str) -> None:
        self.queue.add((kind, namespace, name))

    # -- the reconcilers' workload reader (only while a Deployment is not available) --------

    async def pods(self, namespace: str, selector: str) -> list[Obj]:
        doc = await self.client.list(PODS, namespace, label_selector=selector)
        return list(doc.get("items") or [])

    async def events_about(self, namespace: str, kind: str, name: str) -> list[Obj]:
        doc = await self.client.list(
            EVENTS,
            namespace,
            field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
        )
        return list(doc.get("items") or [])

    # -- running ---------------------------------------------------------------------

    async def _handle(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        kind, namespace, name = (str(part) for part in key)
        started = time.monotonic()
        attributes = {
            otel.RECONCILE_KIND: kind,
            otel.RECONCILE_NAMESPACE: namespace,
            otel.RECONCILE_NAME: name,
        }
        with _TRACER.start_as_current_span(
            f"reconcile {kind}", attributes=attributes, record_exception=False
        ) as span:
            try:
                outcome = await self.reconcilers[kind].reconcile(namespace, name)
            except Exception as exc:
                # Temporary: the status says so already; the queue retries with backoff.
                self.metrics.reconciles.labels(kind, "error").inc()
                self.metrics.errors.labels(kind).inc()
                span.set_attribute(otel.RECONCILE_OUTCOME, "error")
                # The class only: an API error's text can carry object contents.
                span.set_status(StatusCode.ERROR, type(exc).__name__)
                raise
            finally:
                self.metrics.latency.labels(kind).observe(time.monotonic() - started)
            span.set_attribute(otel.RECONCILE_OUTCOME, outcome.value)
        self.metrics.reconciles.labels(kind, outcome.value).inc()
        recheck = self.reconcilers[kind].take_recheck(namespace, name)
        if recheck is not None:
            self.queue.add_after(key, recheck)
        else:
            # Rechecks asked for while a Deployment rolled out would otherwise all come
            # due after a large rollout settled, flooding the queue ahead of real changes.
            self.queue.cancel_delayed(key)

    def informers(self) -> list[Informer]:
        return [*self.resources.values(), *self.owned.values()]

    async def run(self) -> None:
        """Watch and reconcile until cancelled; running reconciles finish on the way out."""
        await self._discover()
        tasks = [
            asyncio.create_task(inf.run(), name=f"informer-{inf.rt.plural}")
            for inf in self.informers()
        ]
        try:
            await asyncio.gather(*(inf.synced.wait() for inf in self.informers()))
            self._workers.start()
            self.synced = True
            log.info("caches synced, reconciling")
            await asyncio.Event().wait()
        finally:
            self.synced = False
            await self._workers.stop()
            for reconciler in self.reconcilers.values():
                await reconciler.close()
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await t
