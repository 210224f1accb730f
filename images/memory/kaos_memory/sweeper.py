"""The periodic sweep of every replica: the outbox, and sessions gone idle.

Each replica sweeps on its own (with jitter, so replicas started together do not sweep in
step); leases in the database decide who does each piece of work, so sweeps on several
replicas never double it. A sweep

- schedules consolidation of sessions with pending fold work that nobody holds a lease
  on: work a dead replica left, work whose retries were exhausted, and work queued while
  another job held the lease (at-least-once delivery of the outbox);
- when the idle flush is on, schedules a flush of sessions nobody wrote to for
  ``KAOS_MEMORY_IDLE_FLUSH_SECONDS`` whose window still holds turns, so a conversation
  too short to cross the fold trigger still reaches the digest and long-term memory;
- takes over erasures a dead replica left pending (see ``erasure``);
- erases what the store's retention says is past its age (``retention``), and drops the
  write-rate counters of past minutes (``quota``);
- records the store's outbox depth.

It only takes as much as the executor has room for, leaving the rest for the next sweep
(or another replica).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random

from kaos_memory.clock import Clock, iso, wall_clock
from kaos_memory.consolidation import Consolidator
from kaos_memory.erasure import Eraser
from kaos_memory.executor import BackgroundExecutor
from kaos_memory.metrics import MemoryMetrics
from kaos_memory.retention import Retention
from kaos_memory.storage.base import ConversationStore
from kaos_memory.storage.errors import StorageError

log = logging.getLogger(__name__)


class Sweeper:
    def __init__(
        self,
        *,
        conversation: ConversationStore,
        consolidator: Consolidator,
        executor: BackgroundExecutor,
        metrics: MemoryMetrics,
        interval: float,
        idle_flush_seconds: float,
        eraser: Eraser | None = None,
        clock: Clock = wall_clock,
        retention: Retention | None = None,
        prune_write_rates: bool = False,
    ) -> None:
        self.eraser = eraser
        self.retention = retention
        self.prune_write_rates = prune_write_rates
        self.conversation = conversation
        self.consolidator = consolidator
        self.executor = executor
        self.metrics = metrics
        self.interval = interval
        self.idle_flush_seconds = idle_flush_seconds
        self.clock = clock
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="kaos-memory-sweeper")

    async def stop(self) -> None:
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _loop(self) -> None:
        # The first sweep runs at once: work a previous process of this replica left.
        while True:
            try:
                await self.sweep()
            except Exception:
                log.warning("sweep failed", exc_info=True)
            await asyncio.sleep(self.interval * random.uniform(0.8, 1.2))

    async def sweep(self) -> None:
        if self.eraser is not None:
            # Erasures a dead replica left half done: they fence their sessions until
            # finished, so they come first.
            await self.eraser.resume()
        if self.retention is not None:
            try:
                await self.retention.sweep()
            except Exception:  # the outbox below must not wait on a retention bug
                log.warning("retention sweep failed", exc_info=True)
        if self.prune_write_rates:
            try:
                await self.conversation.prune_write_rates()
            except StorageError:
                log.warning("pruning write-rate counters failed", exc_info=True)
        room = self.executor.room()
        if room > 0:
            for pending in await self.conversation.outbox(room):
                if not self.consolidator.schedule(pending.key, pending.session, cause="outbox"):
                    break
        room = self.executor.room()
        if self.idle_flush_seconds > 0 and room > 0:
            idle_since = iso(self.clock() - self.idle_flush_seconds)
            for idle in await self.conversation.idle_sessions(idle_since, room):
                if not self.consolidator.schedule_flush(idle.key, idle.session, idle.last_at):
                    break
        self.metrics.outbox_depth.set(await self.conversation.outbox_depth())
        self.metrics.sweeps.inc()
