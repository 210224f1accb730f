"""The work queue: one reconcile per key at a time, keys in parallel, capped backoff.

Semantics follow client-go's workqueue (and kopf's per-object ordering): a key added
while queued is not queued twice; a key added while being processed is processed again
once the current run is done, never concurrently; failures requeue with exponential
backoff capped at ``backoff_max`` (``kaos_core.backoff``), and a success forgets the
failure count.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Hashable
from typing import Protocol

from kaos_core.backoff import capped_backoff

log = logging.getLogger(__name__)


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Timer(Protocol):
    """Where delayed adds are scheduled: the event loop, or a test's manual clock."""

    def time(self) -> float: ...

    def call_at(
        self, when: float, callback: Callable[[Hashable], None], key: Hashable, /
    ) -> TimerHandle: ...


class WorkQueue:
    def __init__(
        self,
        *,
        backoff_base: float = 0.5,
        backoff_max: float = 60.0,
        timer: Timer | None = None,
    ) -> None:
        """``timer``: schedules delayed adds; the running event loop when not given."""
        self._queue: asyncio.Queue[Hashable] = asyncio.Queue()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._failures: dict[Hashable, int] = {}
        self._timers: dict[Hashable, tuple[float, TimerHandle]] = {}
        self._timer = timer
        self._backoff_base = backoff_base
        self._backoff_max = backoff_max
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def depth(self) -> int:
        """Keys waiting to be processed (not counting delayed ones)."""
        return self._queue.qsize()

    def add(self, key: Hashable) -> None:
        if self._closed or key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_after(self, key: Hashable, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; an earlier pending add wins."""
        if delay <= 0:
            self.add(key)
            return
        timer: Timer = self._timer or asyncio.get_running_loop()
        due = timer.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= due:
                return
            pending[1].cancel()
        self._timers[key] = (due, timer.call_at(due, self._fire, key))

    def cancel_delayed(self, key: Hashable) -> None:
        """Drop a pending delayed add of ``key``: its last reconcile asked for none, so
        one asked for earlier (a Deployment that has since become available) is moot."""
        pending = self._timers.pop(key, None)
        if pending is not None:
            pending[1].cancel()

    def _fire(self, key: Hashable) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def backoff(self, key: Hashable) -> float:
        failures = self._failures.get(key, 0)
        return capped_backoff(failures, base=self._backoff_base, cap=self._backoff_max)

    def add_rate_limited(self, key: Hashable) -> float:
        delay = self.backoff(key)
        self._failures[key] = self._failures.get(key, 0) + 1
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    async def get(self) -> Hashable:
        key = await self._queue.get()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        if key in self._dirty and not self._closed:
            self._queue.put_nowait(key)

    def close(self) -> None:
        self._closed = True
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()


Handler = Callable[[Hashable], Awaitable[None]]


class Workers:
    """``count`` tasks taking keys from the queue; ``stop`` lets running reconciles finish."""

    def __init__(
        self,
        queue: WorkQueue,
        handler: Handler,
        count: int,
    ) -> None:
        self._queue = queue
        self._handler = handler
        self._count = count
        self._tasks: list[asyncio.Task[None]] = []
        self._busy: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._work(), name=f"kaos-worker-{i}") for i in range(self._count)
        ]

    async def _work(self) -> None:
        me = asyncio.current_task()
        assert me is not None
        while not self._queue.closed:
            key = await self._queue.get()
            self._busy.add(me)
            try:
                await self._handler(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001  (one bad object must not stop the loop)
                delay = self._queue.add_rate_limited(key)
                log.warning(
                    "reconcile failed, retrying",
                    extra={"key": str(key), "retry_in": delay, "error": str(exc)},
                )
            else:
                self._queue.forget(key)
            finally:
                self._busy.discard(me)
                self._queue.done(key)

    async def stop(self, grace: float = 10.0) -> None:
        """Stop taking keys; give running reconciles ``grace`` seconds, then cancel."""
        self._queue.close()
        idle = [t for t in self._tasks if t not in self._busy]
        for t in idle:
            t.cancel()
        busy = [t for t in self._tasks if t in self._busy]
        if busy:
            _, pending = await asyncio.wait(busy, timeout=grace)
            for t in pending:
                t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
