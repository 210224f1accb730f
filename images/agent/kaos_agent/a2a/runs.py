"""The A2A runs of this replica: started, kept alive in the store, stopped on request, and
drained when the pod stops.

Each run is an ``asyncio`` task keyed by its A2A task's id. While it runs, its lease in
the store is renewed every third of the lease; a cancel requested on another replica
reaches it through the store's notifications (``listen_cancels``) or, failing those, the
poll of ``cancel_requested`` on the same beat. The same beat fails tasks whose lease
lapsed (their replica died) and deletes finished tasks past the retention, a bounded
number each time. On shutdown (``drain``) new runs are refused (``draining``), running
ones get the grace period to finish, and the rest are stopped: their run writes them
failed (``STOPPED``), so no task is left working.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from typing import Any

from kaos_core.errors import KaosError
from prometheus_client import Gauge

from kaos_agent.a2a.tasks import TaskStore

log = logging.getLogger(__name__)

STOPPED = "the agent stopped before this task finished"
# How long stopped runs get to write their final state.
STOP_WAIT_SECONDS = 5.0


class ShuttingDown(KaosError):
    """A new run asked of a replica that is stopping."""

    status = 503
    code = "shutting_down"
    readiness_reason = "shutting_down"

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
        # Set once the grace period ended: a run stopped now ends failed, not canceled.
        self.stopping = False
        self._runs: dict[str, asyncio.Task[None]] = {}
        self._background: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._background.append(asyncio.create_task(self._beat()))
        if self.store.shared:
            listener = self.store.listen_cancels(self.cancel_local)
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
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                await self.tick()
            except KaosError:
                pass  # the store logged it; the next beat tries again
            except Exception:  # the beat outlives one bad turn
                log.exception("task store upkeep failed")

    async def tick(self) -> None:
        """One beat: renew leases, stop runs canceled elsewhere, fail lapsed tasks, and
        delete expired ones."""
        ids = list(self._runs)
        await self.store.renew(self.runner, ids)
        for task_id in await self.store.cancel_requested(ids):
            self.cancel_local(task_id)
        lapsed = await self.store.expire_leases()
        if lapsed:
            log.warning("failed tasks whose replica stopped", extra={"count": lapsed})
        deleted = await self.store.sweep(self.retention_seconds)
        if deleted:
            log.info("deleted finished tasks past their retention", extra={"count": deleted})

    async def drain(self, grace_seconds: float) -> None:
        """Refuse new runs, give running ones ``grace_seconds``, then stop the rest."""
        self.draining = True
        running = [t for t in self._runs.values() if not t.done()]
        if running:
            log.info("waiting for running tasks", extra={"count": len(running)})
            await asyncio.wait(running, timeout=grace_seconds)
        self.stopping = True
        left = [t for t in self._runs.values() if not t.done()]
        if left:
            log.warning("stopping tasks still running at shutdown", extra={"count": len(left)})
            for task in left:
                task.cancel()
            await asyncio.wait(left, timeout=STOP_WAIT_SECONDS)

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
