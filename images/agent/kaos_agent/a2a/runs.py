"""The A2A runs of this replica: started, kept alive in the store, stopped on request, and
drained when the pod stops.

Each run is an ``asyncio`` task keyed by its A2A task's id. While it runs, its lease in
the store is renewed every third of the lease; a cancel requested on another replica
reaches it through the store's notifications (``listen_cancels``) or, failing those, the
poll of ``cancel_requested`` on the same beat. The same beat claims tasks whose lease
lapsed (their replica died) and resumes their runs here (``on_claim``, set by the server),
fails those resumed too often, and deletes finished tasks past the retention, a bounded
number each time; a draining replica claims nothing. On shutdown (``drain``) new runs are
refused (``draining``), running ones get the grace period to finish, and the rest are
stopped. With a shared store they are handed over: stopped without ending their tasks,
their leases released (``TaskStore.release``), so another replica claims them at once
(woken by the store's notification; else at its next beat) and resumes each from its last
checkpoint (the step in flight is lost: a tool call
then is reported interrupted, never made again). Otherwise nobody could resume them: their
run writes them failed (``STOPPED``), so no task is left working.

Why after the grace period and not at once: a run that finishes here loses nothing, while
a hand-over loses the step in flight; and the grace (from the task budget) is what the pod
was given to finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from kaos_core.errors import KaosError
from prometheus_client import Gauge

from kaos_agent.a2a.tasks import Claim, TaskStore

log = logging.getLogger(__name__)

STOPPED = "the agent stopped before this task finished"
# How long stopped runs get to write their final state.
STOP_WAIT_SECONDS = 5.0


class ShuttingDown(KaosError):
    """A new run asked of a replica that is stopping."""

    status = 503
    code = "shutting_down"
    readiness_reason = "shutting_down"
    # The caller's retry must not come back on this kept-alive connection to this pod: a
    # new one goes through the Service to another replica.
    closes_connection = True

    def __init__(self) -> None:
        super().__init__("the agent is shutting down: send the request again (to another replica)")


class TaskRuns:
    def __init__(
        self,
        store: TaskStore,
        *,
        runner: str,
        lease_seconds: float,
        retention_seconds: float,
        working: Gauge | None = None,
        in_flight: Gauge | None = None,
    ) -> None:
        self.store = store
        self.runner = runner
        self.lease_seconds = lease_seconds
        self.retention_seconds = retention_seconds
        # This replica's working tasks, and its A2A runs in flight (the same count).
        self._gauges = [g for g in (working, in_flight) if g is not None]
        self.draining = False
        # Set once the grace period ended: a run stopped now ends failed, not canceled...
        self.stopping = False
        # ...or, handed over to another replica, does not end at all.
        self.handing_over = False
        self._beating: asyncio.Task[None] | None = None
        # Set when another replica released leases: the beat claims at once.
        self._wake = asyncio.Event()
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._background: list[asyncio.Task[None]] = []
        # Resumes the run of a task this replica claimed (the A2A server's).
        self.on_claim: Callable[[Claim], None] | None = None
        # More upkeep on each beat while not draining (the approvals' timeouts).
        self.upkeep: list[Callable[[], Awaitable[None]]] = []

    async def start(self) -> None:
        self._beating = asyncio.create_task(self._beat())
        self._background.append(self._beating)
        if self.store.shared:
            listener = self.store.listen_cancels(self.cancel_local, self._wake.set)
            self._background.append(asyncio.create_task(listener))

    def check_open(self) -> None:
        """Raise ``ShuttingDown`` once draining (for the readiness check and new runs)."""
        if self.draining:
            raise ShuttingDown()

    def begin(self, task_id: str, run: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(run)
        self._runs[task_id] = task
        self._count()
        task.add_done_callback(lambda _: self._forget(task_id))
        return task

    def cancel_local(self, task_id: str) -> None:
        """Stop the run of ``task_id`` if this replica runs it (its state is already set)."""
        task = self._runs.get(task_id)
        if task is not None and not task.done():
            log.info("stopping a canceled task's run", extra={"task": task_id})
            task.cancel()

    def _forget(self, task_id: str) -> None:
        self._runs.pop(task_id, None)
        self._count()

    def _count(self) -> None:
        for gauge in self._gauges:
            gauge.set(len(self._runs))

    async def _beat(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.lease_seconds / 3)
            self._wake.clear()
            try:
                await self.tick()
            except KaosError:
                pass  # the store logged it; the next beat tries again
            except Exception:  # the beat outlives one bad turn
                log.exception("task store upkeep failed")

    async def tick(self) -> None:
        """One beat: renew leases, stop runs canceled elsewhere, resume or fail lapsed
        tasks, and delete expired ones."""
        ids = list(self._runs)
        await self.store.renew(self.runner, ids)
        for task_id in await self.store.cancel_requested(ids):
            self.cancel_local(task_id)
        if not self.draining and self.on_claim is not None:
            for claim in await self.store.claim_lapsed(self.runner):
                if claim.task.id in self._runs:
                    continue  # still running here (a late beat): the claim renewed it
                log.warning(
                    "resuming a task whose replica stopped",
                    extra={"task": claim.task.id, "resumes": claim.resumes},
                )
                self.on_claim(claim)
        if not self.draining:
            for work in self.upkeep:
                await work()
        lapsed = await self.store.expire_leases()
        if lapsed:
            log.warning("failed tasks whose replica stopped", extra={"count": lapsed})
        deleted = await self.store.sweep(self.retention_seconds)
        if deleted:
            log.info("deleted finished tasks past their retention", extra={"count": deleted})

    async def drain(self, grace_seconds: float) -> None:
        """Refuse new runs, give running ones ``grace_seconds``, then stop the rest: handed
        over with a shared store, failed otherwise."""
        self.draining = True
        running = [t for t in self._runs.values() if not t.done()]
        if running:
            log.info("waiting for running tasks", extra={"count": len(running)})
            await asyncio.wait(running, timeout=grace_seconds)
        left_running = {i: t for i, t in self._runs.items() if not t.done()}
        if left_running and self.store.shared:
            await self._hand_over(left_running)
        self.stopping = True
        left = [t for t in self._runs.values() if not t.done()]
        if left:
            log.warning("stopping tasks still running at shutdown", extra={"count": len(left)})
            for task in left:
                task.cancel()
            await asyncio.wait(left, timeout=STOP_WAIT_SECONDS)

    async def _hand_over(self, runs: dict[str, asyncio.Task[None]]) -> None:
        """Stop ``runs`` without ending their tasks and release their leases."""
        log.warning("handing running tasks over to other replicas", extra={"count": len(runs)})
        self.handing_over = True
        # The beat first: a renewal after the release would hold the leases again.
        if self._beating is not None:
            self._beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._beating
        for task in runs.values():
            task.cancel()
        await asyncio.wait(runs.values(), timeout=STOP_WAIT_SECONDS)
        try:
            released = await self.store.release(self.runner, list(runs))
        except KaosError:
            return  # the store logged it; the leases lapse on their own
        log.info("released the leases of handed-over tasks", extra={"count": released})

    async def close(self) -> None:
        """Stop everything still running (a drain that did not happen) and the upkeep."""
        if not self.stopping:
            await self.drain(0)
        for task in self._background:
            task.cancel()
        for task in self._background:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._background.clear()
