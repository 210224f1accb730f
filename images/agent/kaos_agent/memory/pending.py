"""Writes sent after the answer: a soft-mode turn's write leaves the reply's path.

Under ``failureMode: soft`` a failed write only counts and logs, so the caller learns
nothing from waiting for it; the write's round trip is then pure latency on every turn.
It runs after the answer instead, with two guarantees kept:

- the same conversation reads its own writes: a write is filed under the run's principal
  and session, and the next recall of that pair on this replica waits for it first;
- nothing is dropped on the way out: ``drain`` waits for every pending write when the pod
  stops (its grace period bounds it), and past ``limit`` pending writes a new one is
  awaited in line, so a slow store slows turns down instead of piling writes up.

A conversation whose next turn lands on another replica may miss a write still in flight
there (the window of one write's round trip); a ``strict`` agent writes before answering.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable

from prometheus_client import Gauge

log = logging.getLogger(__name__)


class PendingWrites:
    def __init__(self, limit: int = 256, gauge: Gauge | None = None) -> None:
        self.limit = limit
        self.gauge = gauge
        self._tails: dict[Hashable, asyncio.Task[None]] = {}
        self._count = 0

    def __len__(self) -> int:
        """Writes not ended yet."""
        return self._count

    async def submit(self, key: Hashable, write: Callable[[], Awaitable[None]]) -> None:
        """Run ``write`` after the key's earlier writes; in line when too many are pending."""
        previous = self._tails.get(key)
        if len(self._tails) >= self.limit:
            if previous is not None:
                await asyncio.wait([previous])
            await write()
            return
        self._moved(+1)
        task = asyncio.create_task(self._after(previous, write))
        self._tails[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))

    async def settled(self, key: Hashable) -> None:
        """Return once every write filed under ``key`` so far has ended (however it ended)."""
        tail = self._tails.get(key)
        if tail is not None:
            # wait, not await: a cancelled reader must not cancel the conversation's write.
            await asyncio.wait([tail])

    async def drain(self, within: float) -> None:
        """Wait up to ``within`` seconds for every pending write; cancel what is left."""
        tails = list(self._tails.values())
        if not tails:
            return
        _, late = await asyncio.wait(tails, timeout=within)
        for task in late:
            task.cancel()
        if late:
            log.warning(
                "memory writes still pending at shutdown were abandoned", extra={"count": len(late)}
            )

    def _forget(self, key: Hashable, done: asyncio.Task[None]) -> None:
        self._moved(-1)
        if self._tails.get(key) is done:
            del self._tails[key]

    def _moved(self, by: int) -> None:
        self._count += by
        if self.gauge is not None:
            self.gauge.set(self._count)

    @staticmethod
    async def _after(
        previous: asyncio.Task[None] | None, write: Callable[[], Awaitable[None]]
    ) -> None:
        if previous is not None:
            await asyncio.wait([previous])
        try:
            await write()
        except Exception:
            # The write's own handling counted and logged what it knows; nothing waits here.
            log.warning("memory write after the answer failed", exc_info=True)
