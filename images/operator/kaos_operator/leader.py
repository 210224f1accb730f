"""Leader election on a coordination.k8s.io Lease, as client-go's leaderelection does it.

Only the holder of the Lease runs the controller. The holder renews every
``retry_period``; a candidate takes over once it has seen the same record unrenewed for
``lease_duration`` (measured on its own monotonic clock, so clock skew between nodes does
not matter). A holder that cannot renew within ``renew_deadline`` stops leading before
anyone else may start. On graceful shutdown the holder releases the Lease, so a standby
takes over at its next retry instead of after a full lease duration.

An election that cannot make progress must not be silent: every failed attempt to
acquire or renew is logged at WARNING with the API server's status and reason and the
Lease's namespace, and ``progressing`` turns False until an attempt gets an answer
(the app's readiness reports it). A standby that sees another holder is progressing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, Protocol

from kaos_operator.kube import LEASES, ApiError, Obj, ResourceType
from kaos_operator.settings import LeaderSettings

log = logging.getLogger(__name__)

Lead = Callable[[], Coroutine[Any, Any, None]]


class LeaseClient(Protocol):
    """The requests an election makes (``KubeClient`` has them)."""

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> Obj | None: ...

    async def create(self, rt: ResourceType, namespace: str | None, body: Obj) -> Obj: ...

    async def replace(
        self, rt: ResourceType, namespace: str | None, name: str, body: Obj
    ) -> Obj: ...


def micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        client: LeaseClient,
        settings: LeaderSettings,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self._client = client
        self._s = settings
        self._on_change = on_change
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self.leading = False
        # True until an attempt fails; the first attempt is made at once on ``run``.
        self.progressing = True

    @property
    def identity(self) -> str:
        return self._s.identity

    def _set_leading(self, value: bool) -> None:
        if value != self.leading:
            log.info("leadership changed", extra={"leading": value, "identity": self.identity})
        self.leading = value
        if self._on_change is not None:
            self._on_change(value)

    def _lease_body(self, current: Obj | None, now: str) -> Obj:
        spec = dict((current or {}).get("spec") or {})
        transitions = int(spec.get("leaseTransitions") or 0)
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            transitions += 1 if current is not None else 0
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, round(self._s.lease_duration)),
            renewTime=now,
            leaseTransitions=transitions,
        )
        meta: Obj = {"name": self._s.lease_name, "namespace": self._s.namespace}
        if current is not None:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        return {
            "apiVersion": LEASES.api_version,
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this process holds the Lease afterwards."""
        ns, name = self._s.namespace, self._s.lease_name
        now = micro_time()
        try:
            current = await self._client.get(LEASES, ns, name)
            if current is None:
                await self._client.create(LEASES, ns, self._lease_body(None, now))
                self.progressing = True
                return True
            spec = current.get("spec") or {}
            holder = spec.get("holderIdentity") or ""
            record = (holder, spec.get("renewTime"), spec.get("leaseDurationSeconds"))
            if record != self._observed:
                self._observed, self._observed_at = record, time.monotonic()
            duration = float(spec.get("leaseDurationSeconds") or self._s.lease_duration)
            expired = time.monotonic() > self._observed_at + duration
            if holder and holder != self.identity and not expired:
                self.progressing = True  # a healthy standby
                return False
            await self._client.replace(LEASES, ns, name, self._lease_body(current, now))
        except ApiError as exc:
            # A conflict means another candidate wrote the Lease first: the election moves.
            self.progressing = exc.status == 409
            log.warning(
                "cannot renew the leader Lease"
                if self.leading
                else "cannot acquire the leader Lease",
                extra={
                    "namespace": ns,
                    "lease": name,
                    "identity": self.identity,
                    "status": exc.status,
                    "reason": exc.reason,
                    # The API server's own words (which namespace is missing, which verb
                    # is forbidden); it never echoes a credential.
                    "detail": exc.message[:300],
                },
            )
            return False
        self.progressing = True
        return True

    async def _acquire(self) -> None:
        while True:
            if await self.try_acquire_or_renew():
                return
            await asyncio.sleep(self._s.retry_period)  # the election's retry period

    async def _hold(self, task: asyncio.Task[None]) -> None:
        """Renew until renewal fails for ``renew_deadline`` or the task ends."""
        last_renew = time.monotonic()
        while not task.done():
            await asyncio.wait({task}, timeout=self._s.retry_period)
            if task.done():
                return
            if await self.try_acquire_or_renew():
                last_renew = time.monotonic()
            elif time.monotonic() - last_renew > self._s.renew_deadline:
                log.warning("lost the lease", extra={"identity": self.identity})
                return

    async def run(self, lead: Lead) -> None:
        """Campaign forever; run ``lead()`` while holding the Lease."""
        while True:
            await self._acquire()
            self._set_leading(True)
            task = asyncio.create_task(lead(), name="kaos-leader-work")
            try:
                await self._hold(task)
            finally:
                self._set_leading(False)
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if task.done() and not task.cancelled() and task.exception() is not None:
                log.error("controller stopped", exc_info=task.exception())

    async def release(self) -> None:
        """Give the Lease up (graceful shutdown) if this process holds it."""
        ns, name = self._s.namespace, self._s.lease_name
        try:
            current = await self._client.get(LEASES, ns, name)
            if (
                current is None
                or (current.get("spec") or {}).get("holderIdentity") != self.identity
            ):
                return
            body = self._lease_body(current, micro_time())
            body["spec"].pop("holderIdentity", None)
            body["spec"]["leaseDurationSeconds"] = 1
            await self._client.replace(LEASES, ns, name, body)
            log.info("released the lease", extra={"identity": self.identity})
        except ApiError as exc:
            log.warning("could not release the lease", extra={"error": str(exc)})
