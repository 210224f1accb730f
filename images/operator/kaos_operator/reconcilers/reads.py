"""Reads of a backend (a ModelAPI's capabilities, an MCPServer's tools, a MemoryStore's
receipt key), made beside the work queue rather than in it.

A read goes to a pod through its Service and can take as long as its timeout: a Service
that does not answer yet, a NetworkPolicy that drops the operator's packets. Made inside a
reconcile, it holds a worker for that long; a hundred stores turning available together
held every worker, and no other resource was reconciled until their reads timed out. So a
reconcile only starts the read and reports it as under way (``READING``); the read runs as
a task of its own and, when it ends, wakes its resource, whose next reconcile takes the
result. What a backend says changes only with the spec, so the last good read is kept per
(uid, generation). Failed reads in a row are counted: the next one is not started before
``recheck_delay`` of them has passed, whatever else queues the resource meanwhile.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from kaos_core.crds.common import Condition, CustomObject

from kaos_operator.status import StatusBuilder

V = TypeVar("V")
Key = tuple[str, str]  # (namespace, name)
Version = tuple[str, int]  # (uid, generation)

# Failed reads of a backend are retried after 2, 4, 8 ... seconds, at most five minutes
# apart.
RECHECK_BASE = 2.0
RECHECK_MAX = 300.0


def recheck_delay(failures: int) -> float:
    """The wait before the next read after ``failures`` failed reads in a row."""
    return float(min(RECHECK_BASE * 2 ** max(failures - 1, 0), RECHECK_MAX))


@dataclass(frozen=True)
class ReadFailure:
    """A failed read of a backend: the error, and the wait before the next read."""

    error: Exception
    delay: float


class ReadPending(enum.Enum):
    """A read under way: its end wakes the resource."""

    READING = "reading"


READING = ReadPending.READING


def report_reading(
    status: StatusBuilder,
    type_: str,
    last: Condition | None,
    *,
    failed: str,
    reading: str,
    message: str,
) -> None:
    """Condition ``type_`` while a read is under way (``last``: the resource's standing
    one): the failure of the read before (reason ``failed``) stands until this one
    answers, so a retry does not flap it to Unknown and back; otherwise Unknown, reason
    ``reading``."""
    if last is not None and last.reason == failed:
        status.condition(type_, last.status, last.reason, last.message)
    else:
        status.condition(type_, "Unknown", reading, message)


@dataclass
class _Failed:
    version: Version
    error: Exception
    failures: int
    retry_at: float


class BackendReads(Generic[V]):
    """The reads of one kind's backends, one at a time per resource."""

    def __init__(
        self, wake: Callable[[CustomObject], None], *, clock: Callable[[], float] = time.time
    ) -> None:
        """``wake``: queues a resource again once its read has ended; ``clock``: seconds,
        for when a failed read may be made again."""
        self._wake = wake
        self._clock = clock
        self._values: dict[Key, tuple[Version, V]] = {}
        self._failed: dict[Key, _Failed] = {}
        self._running: dict[Key, tuple[Version, asyncio.Task[None]]] = {}

    def read(
        self, res: CustomObject, read: Callable[[], Awaitable[V]]
    ) -> V | ReadFailure | ReadPending:
        """The value read for this generation of ``res``; else the last failure while its
        delay runs; else ``READING``, with a read started unless one already is."""
        key = (res.namespace, res.name)
        version = (res.metadata.uid, res.metadata.generation)
        cached = self._values.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        running = self._running.get(key)
        if running is not None:
            if running[0] == version:
                return READING
            running[1].cancel()  # a read for a generation that is gone
            del self._running[key]
        failed = self._failed.get(key)
        now = self._clock()
        if failed is not None and failed.version == version and now < failed.retry_at:
            return ReadFailure(failed.error, failed.retry_at - now)
        task = asyncio.create_task(self._run(res, key, version, read))
        self._running[key] = (version, task)
        return READING

    async def _run(
        self, res: CustomObject, key: Key, version: Version, read: Callable[[], Awaitable[V]]
    ) -> None:
        try:
            value = await read()
        except Exception as exc:  # noqa: BLE001  (a backend that is down is reported)
            before = self._failed.get(key)
            failures = (before.failures if before is not None else 0) + 1
            retry_at = self._clock() + recheck_delay(failures)
            self._failed[key] = _Failed(version, exc, failures, retry_at)
        else:
            self._failed.pop(key, None)
            self._values[key] = (version, value)
        finally:
            running = self._running.get(key)
            if running is not None and running[0] == version:
                del self._running[key]
        self._wake(res)

    async def close(self) -> None:
        """Cancel the reads under way (the operator is stopping)."""
        tasks = [task for _, task in self._running.values()]
        self._running.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
