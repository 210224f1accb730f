"""Informers: list, then watch from the list's resourceVersion, keeping a local cache.

A watch that ends (server timeout, dropped connection) resumes from the last
resourceVersion seen, bookmarks included, so nothing is missed and nothing is listed
again. Only a 410 Gone (the version was compacted away) makes the informer list afresh;
the relist is diffed against the cache so handlers see the deletions they missed. The
cache holds objects without their ``managedFields``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kaos_operator.kube import ApiError, Gone, KubeClient, Obj, ResourceType

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name)
EventHandler = Callable[[str, Obj], None]


def trimmed(obj: Obj) -> Obj:
    """``obj`` as the cache keeps it: without ``metadata.managedFields``, the server-side
    apply bookkeeping nothing here reads, which is the larger part of a small object and
    would otherwise be held once per object for the life of the process."""
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


def key_of(obj: Obj) -> Key:
    meta = obj["metadata"]
    return (meta.get("namespace", ""), meta["name"])


class Informer:
    """The cached state of one resource type, kept current by one list+watch loop."""

    def __init__(
        self,
        client: KubeClient,
        rt: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        on_event: EventHandler | None = None,
        watch_timeout: int = 300,
        retry_delay: float = 1.0,
        resource_version: str | None = None,
    ) -> None:
        """``resource_version``: resume watching from there instead of listing first."""
        self.rt = rt
        self.cache: dict[Key, Obj] = {}
        self.synced = asyncio.Event()
        self.relists = 0
        self._client = client
        self._namespace = namespace
        self._selector = label_selector
        self._handlers: list[EventHandler] = [on_event] if on_event else []
        self._watch_timeout = watch_timeout
        self._retry_delay = retry_delay
        self._rv: str | None = resource_version

    def add_handler(self, handler: EventHandler) -> None:
        self._handlers.append(handler)

    def get(self, namespace: str, name: str) -> Obj | None:
        return self.cache.get((namespace, name))

    def _emit(self, event: str, obj: Obj) -> None:
        for handler in self._handlers:
            try:
                handler(event, obj)
            except Exception:
                log.exception("event handler failed", extra={"kind": self.rt.kind})

    async def _list(self) -> None:
        doc = await self._client.list(self.rt, self._namespace, label_selector=self._selector)
        fresh: dict[Key, Obj] = {}
        for item in doc.get("items", []):
            # List items carry no apiVersion/kind; the desired-state code wants them.
            item.setdefault("apiVersion", self.rt.api_version)
            item.setdefault("kind", self.rt.kind)
            fresh[key_of(item)] = trimmed(item)
        old = self.cache
        self.cache = fresh
        self._rv = str(doc.get("metadata", {}).get("resourceVersion", ""))
        for key, obj in fresh.items():
            prev = old.get(key)
            if prev is None:
                self._emit("ADDED", obj)
            elif prev["metadata"].get("resourceVersion") != obj["metadata"].get("resourceVersion"):
                self._emit("MODIFIED", obj)
        for key, obj in old.items():
            if key not in fresh:
                self._emit("DELETED", obj)
        self.synced.set()

    async def _watch_once(self) -> None:
        assert self._rv is not None
        async for event in self._client.watch(
            self.rt,
            self._namespace,
            resource_version=self._rv,
            label_selector=self._selector,
            timeout_seconds=self._watch_timeout,
        ):
            kind = event.get("type")
            obj = event.get("object") or {}
            rv = obj.get("metadata", {}).get("resourceVersion")
            if rv:
                self._rv = str(rv)
            if kind == "BOOKMARK":
                continue
            key = key_of(obj)
            if kind == "DELETED":
                self.cache.pop(key, None)
            else:
                self.cache[key] = trimmed(obj)
            self._emit(str(kind), obj)

    async def run(self) -> None:
        """List and watch until cancelled."""
        while True:
            try:
                if self._rv is None:
                    await self._list()
                await self._watch_once()
            except Gone:
                log.info("watch expired, relisting", extra={"kind": self.rt.kind})
                self._rv = None
                self.relists += 1
            except ApiError as exc:
                log.warning(
                    "watch failed, resuming",
                    extra={"kind": self.rt.kind, "error": str(exc)},
                )
                await asyncio.sleep(self._retry_delay)  # backoff before reconnecting
