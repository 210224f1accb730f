"""Bounded background execution for folds and extractions, off the request path.

A fixed number of worker tasks take jobs from a bounded queue. ``submit`` never waits:
when the queue is full it answers ``False`` and the caller marks its answer degraded (the
turns are already durable in the window, so a later write re-triggers the fold). Each job
gets bounded retries with capped exponential backoff; a job that still fails is counted
and logged. ``drain`` stops intake and lets queued and running jobs finish within a
deadline (SIGTERM), then cancels what is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from kaos_core.backoff import capped_backoff

from kaos_memory.metrics import MemoryMetrics

log = logging.getLogger(__name__)

JobFn = Callable[[], Awaitable[None]]


class PermanentJobError(Exception):
    """A job failure that retrying cannot fix (the job's input is gone or invalid)."""


@dataclass(frozen=True)
class Job:
    kind: str
    run: JobFn


@dataclass(frozen=True)
class RetryPolicy:
    retries: int
    backoff: float
    backoff_max: float

    def delay(self, attempt: int) -> float:
        """The wait before retry ``attempt`` (0 for the first)."""
        return capped_backoff(attempt, base=self.backoff, cap=self.backoff_max)


class BackgroundExecutor:
    def __init__(
        self,
        *,
        workers: int,
        queue_size: int,
        retry: RetryPolicy,
        metrics: MemoryMetrics,
    ) -> None:
        self._workers = workers
        self._queue: asyncio.Queue[Job] = asyncio.Queue(maxsize=queue_size)
        self._retry = retry
        self._metrics = metrics
        self._tasks: list[asyncio.Task[None]] = []
        self._accepting = False
        self._in_flight = 0

    def start(self) -> None:
        self._accepting = True
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"kaos-memory-worker-{i}")
            for i in range(self._workers)
        ]

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def submit(self, kind: str, run: JobFn) -> bool:
        """Queue a job; ``False`` (and a degraded count) when full or shutting down."""
        if not self._accepting:
            self._metrics.degraded.labels(reason="executor_closed").inc()
            return False
        try:
            self._queue.put_nowait(Job(kind, run))
        except asyncio.QueueFull:
            self._metrics.degraded.labels(reason="queue_full").inc()
            log.warning("background queue full, job dropped", extra={"kind": kind})
            return False
        self._metrics.queue_depth.set(self._queue.qsize())
        return True

    def has_room(self) -> bool:
        return self._accepting and not self._queue.full()

    def room(self) -> int:
        """Jobs that can be queued now without a refusal."""
        if not self._accepting:
            return 0
        return max(0, self._queue.maxsize - self._queue.qsize())

    async def _worker(self) -> None:
        while True:
            job = await self._queue.get()
            self._metrics.queue_depth.set(self._queue.qsize())
            self._in_flight += 1
            self._metrics.in_flight.set(self._in_flight)
            try:
                await self.run_with_retry(job.kind, job.run)
            finally:
                self._in_flight -= 1
                self._metrics.in_flight.set(self._in_flight)
                self._queue.task_done()

    async def run_with_retry(self, kind: str, run: JobFn) -> bool:
        """Run ``run`` with the retry policy; True on success, False once it gave up.

        Also used inside a job for steps that must retry on their own (a fold's digest and
        its extraction), so one step's failure does not repeat the other.
        """
        job = Job(kind, run)
        for attempt in range(self._retry.retries + 1):
            started = time.perf_counter()
            try:
                await job.run()
            except asyncio.CancelledError:
                raise
            except PermanentJobError as exc:
                self._metrics.job_failures.labels(kind=job.kind).inc()
                log.warning(
                    "background job failed permanently",
                    extra={"kind": job.kind, "error": str(exc)},
                )
                return False
            except Exception as exc:  # noqa: BLE001  (any failure is retried, then counted)
                last = attempt == self._retry.retries
                log.warning(
                    "background job failed",
                    extra={
                        "kind": job.kind,
                        "attempt": attempt + 1,
                        "final": last,
                        "error": repr(exc),
                    },
                )
                if last:
                    self._metrics.job_failures.labels(kind=job.kind).inc()
                    return False
                self._metrics.job_retries.labels(kind=job.kind).inc()
                await asyncio.sleep(self._retry.delay(attempt))
            else:
                self._metrics.jobs.labels(kind=job.kind).inc()
                self._metrics.job_duration.labels(kind=job.kind).observe(
                    time.perf_counter() - started
                )
                return True
        return False

    async def drain(self, deadline: float) -> bool:
        """Stop intake, finish queued and running jobs within ``deadline`` seconds."""
        self._accepting = False
        pending = self._queue.qsize() + self._in_flight
        log.info("draining background jobs", extra={"pending": pending, "deadline_s": deadline})
        done = True
        try:
            await asyncio.wait_for(self._queue.join(), deadline)
        except TimeoutError:
            done = False
            log.warning(
                "drain deadline passed, abandoning jobs",
                extra={"left": self._queue.qsize() + self._in_flight},
            )
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        return done
