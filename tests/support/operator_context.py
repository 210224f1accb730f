"""A ``ReconcileContext`` over plain dictionaries, so reconcilers run without a cluster.

The caches are dicts keyed like the controller's informers; ``apply`` and
``write_status`` record what a reconciler sent (and put applied objects into the live
cache, as the next watch event would); ``apply_errors`` makes the next applies fail.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kaos_operator.kube import DEPLOYMENTS, ApiError, Obj, ResourceType
from kaos_operator.settings import ReconcileSettings

from tests.support.operator_objects import IMAGES, OPEN

API_VERSION = "kaos.tools/v1alpha1"
# A backend read on loopback ends well within this.
WAKE_TIMEOUT = 30.0


@dataclass
class Event:
    obj: str
    type_: str
    reason: str
    message: str


@dataclass
class FakeContext:
    settings: ReconcileSettings = field(
        default_factory=lambda: ReconcileSettings(images=IMAGES, posture=OPEN)
    )
    resources: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    objects: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    applies: list[tuple[str, list[Obj]]] = field(default_factory=list)
    statuses: list[tuple[str, Obj]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    apply_errors: list[ApiError] = field(default_factory=list)
    status_errors: list[ApiError] = field(default_factory=list)
    requeued: list[tuple[str, str, str]] = field(default_factory=list)
    _woken: asyncio.Event | None = None

    # -- test set-up -------------------------------------------------------------------

    def add(self, raw: Obj) -> Obj:
        meta = raw["metadata"]
        self.resources[(raw["kind"], meta["namespace"], meta["name"])] = raw
        return raw

    def deployment_available(self, namespace: str, name: str) -> None:
        """The applied Deployment rolled out, as the deployment controller would report."""
        dep = self.objects[("Deployment", namespace, name)]
        replicas = dep["spec"].get("replicas", 1)
        dep["metadata"]["generation"] = 1
        dep["status"] = {
            "observedGeneration": 1,
            "readyReplicas": replicas,
            "conditions": [{"type": "Available", "status": "True"}],
        }

    def status_of(self, kind: str, namespace: str, name: str) -> Obj:
        return dict(self.resources[(kind, namespace, name)].get("status") or {})

    # -- ReconcileContext --------------------------------------------------------------

    def resource(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.resources.get((kind, namespace, name))

    def resources_in(self, kind: str, namespace: str) -> list[Obj]:
        return [o for (k, ns, _), o in self.resources.items() if (k, ns) == (kind, namespace)]

    def live(self, rt: ResourceType, namespace: str, name: str) -> Obj | None:
        return self.objects.get((rt.kind, namespace, name))

    async def apply(self, owner_uid: str, desired: Sequence[Obj]) -> None:
        self.applies.append((owner_uid, list(desired)))
        if self.apply_errors:
            raise self.apply_errors.pop(0)
        for obj in desired:
            meta = obj["metadata"]
            key = (obj["kind"], meta["namespace"], meta["name"])
            current = self.objects.get(key)
            applied = copy.deepcopy(obj)
            if current is not None and "status" in current:
                applied["status"] = current["status"]
                applied["metadata"]["generation"] = current["metadata"].get("generation", 1)
            self.objects[key] = applied

    async def write_status(self, rt: ResourceType, obj: Obj, status: Obj) -> None:
        meta = obj["metadata"]
        key = f"{rt.kind}/{meta['namespace']}/{meta['name']}"
        if self.status_errors:
            raise self.status_errors.pop(0)
        self.statuses.append((key, copy.deepcopy(status)))
        # The API server now holds it: the next reconcile reads it from the cache.
        self.resources[(rt.kind, meta["namespace"], meta["name"])] = {**obj, "status": status}

    async def record_event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(obj["metadata"]["name"], type_, reason, message))

    def requeue(self, kind: str, namespace: str, name: str) -> None:
        self.requeued.append((kind, namespace, name))
        if self._woken is not None:
            self._woken.set()

    async def woken(self, kind: str, namespace: str, name: str) -> None:
        """Until ``requeue`` has been asked for the resource (a backend read has ended),
        as the queue would then reconcile it; forgets that ask."""
        key = (kind, namespace, name)
        while key not in self.requeued:
            self._woken = asyncio.Event()
            await asyncio.wait_for(self._woken.wait(), WAKE_TIMEOUT)
        self.requeued.remove(key)


def raw(kind: str, name: str, spec: dict[str, Any], namespace: str = "ns") -> Obj:
    """A custom object as the informer caches it (after the API server's defaulting)."""
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": spec,
    }


def proxy_api_spec() -> dict[str, Any]:
    return {"mode": "Proxy", "proxyConfig": {"models": ["openai/gpt-4o-mini"]}}


def store_spec() -> dict[str, Any]:
    return {"models": {"summarization": {"modelAPI": "llm"}, "embedding": {"modelAPI": "llm"}}}


def ready_model_api(ctx: FakeContext, name: str = "llm") -> Obj:
    """A ModelAPI in the cache whose status says Ready (the dependency of the others)."""
    obj = raw("ModelAPI", name, proxy_api_spec())
    obj["status"] = {
        "phase": "Ready",
        "endpoint": f"http://{name}.ns.svc:4000",
        "models": ["openai/gpt-4o-mini"],
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Available",
                "message": "deployment available",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "observedGeneration": 1,
            }
        ],
    }
    return ctx.add(obj)


class ManualTimer:
    """A ``queue.Timer`` whose time moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0
        self._pending: list[tuple[float, int, Callable[[Hashable], None], Hashable]] = []
        self._seq = 0

    def time(self) -> float:
        return self.now

    def call_at(
        self, when: float, callback: Callable[[Hashable], None], key: Hashable, /
    ) -> _Handle:
        self._seq += 1
        entry = (when, self._seq, callback, key)
        self._pending.append(entry)
        return _Handle(self, entry)

    @property
    def pending(self) -> int:
        return len(self._pending)

    def advance(self, seconds: float) -> None:
        """Move time on and fire, in order, every callback that became due."""
        self.now += seconds
        due = sorted(e for e in self._pending if e[0] <= self.now)
        for entry in due:
            self._pending.remove(entry)
            entry[2](entry[3])


class _Handle:
    def __init__(self, timer: ManualTimer, entry: Any) -> None:
        self._timer = timer
        self._entry = entry

    def cancel(self) -> None:
        if self._entry in self._timer._pending:
            self._timer._pending.remove(self._entry)


__all__ = ["DEPLOYMENTS", "FakeContext", "ManualTimer", "raw"]
