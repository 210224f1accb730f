"""The per-principal vector cache: principals' fact vectors held in the service for
recall, within a byte budget. What the two backends' caches share (``pgvector.cache`` in
external mode, ``chroma.cache`` in local mode): each decides what an entry holds and how
it is kept current; this module decides which entries stay.

An entry counts ``size`` bytes against ``max_bytes``. One that does not fit is admitted
only once the entries nobody searched for ``IDLE`` seconds are dropped; otherwise it is
refused, the store keeps serving that principal, and the mode retries after ``IDLE``.
Dropping the least recently used instead thrashes as soon as the searched principals
outgrow the budget: every search drops one principal to load another, and a recall then
costs several times the database's own search (the figures: docs/benchmarks.md, "Measured
figures behind the design"). Entries of size 0 (a principal known by version only, or
without facts) cost nothing and are forgotten once idle for ``IDLE``, so every principal
ever searched does not stay. Loads run one at a time, so a burst of new principals does
not take the service's CPU from its requests.

The maps are changed under a lock: in local mode a write's thread drops entries while the
event loop searches and keeps them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from kaos_memory.storage.mem0.terms import Key

# Seconds without a search after which a held principal may give its place to another;
# also how long a principal refused for want of room waits before it is tried again.
IDLE = 300.0
# Searches larger than this (rows x dimensions) run off the event loop.
LOOP_PRODUCT = 2_000_000


def retry_due(refused: float | None, now: float) -> bool:
    """Whether a principal refused for want of room at ``refused`` may be tried again."""
    return refused is not None and now - refused > IDLE


class Entry(Protocol):
    @property
    def size(self) -> int: ...


E = TypeVar("E", bound=Entry)


class PrincipalVectorCache(Generic[E]):
    """Entries by principal within ``max_bytes``, and their loads, one at a time."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._held: dict[Key, E] = {}
        self._used: dict[Key, float] = {}  # last search of each entry (monotonic)
        self._bytes = 0
        self._lock = threading.RLock()
        self._loading: dict[Key, asyncio.Task[None]] = {}
        self._lane = asyncio.Semaphore(1)

    def stats(self) -> tuple[int, int]:
        """Principals held (entries of any size), and those being loaded or waiting to be."""
        with self._lock:
            held = sum(1 for e in self._held.values() if e.size > 0)
        return held, len(self._loading)

    def _entry(self, key: Key) -> E | None:
        """``key``'s entry, marked used now."""
        with self._lock:
            entry = self._held.get(key)
            if entry is not None:
                self._used[key] = time.monotonic()
            return entry

    def _keep(self, key: Key, entry: E, now: float) -> bool:
        """Hold ``entry`` for ``key`` if it fits (see the module docstring); False, and
        ``key`` no longer held, if it does not."""
        with self._lock:
            self._drop(key)
            self._forget_idle(now)
            if entry.size > 0 and not self._room(entry.size, now):
                return False
            self._held[key] = entry
            self._bytes += entry.size
            self._used[key] = now
            return True

    def _drop(self, key: Key) -> None:
        """Under the lock."""
        old = self._held.pop(key, None)
        self._used.pop(key, None)
        if old is not None:
            self._bytes -= old.size

    def _drop_all(self) -> None:
        """Under the lock."""
        self._held.clear()
        self._used.clear()
        self._bytes = 0

    def _forget_idle(self, now: float) -> None:
        """Under the lock: drop the entries of size 0 nobody searched for ``IDLE``."""
        for key in [
            k for k, e in self._held.items() if e.size == 0 and now - self._used.get(k, now) > IDLE
        ]:
            self._drop(key)

    def _room(self, size: int, now: float) -> bool:
        """Under the lock: whether ``size`` more bytes fit, once entries idle for ``IDLE``
        are dropped."""
        idle = sorted(
            (used, key)
            for key, used in self._used.items()
            if now - used > IDLE and self._held[key].size > 0
        )
        for _, key in idle:
            if self._bytes + size <= self.max_bytes:
                break
            self._drop(key)
        return self._bytes + size <= self.max_bytes

    def _schedule(self, key: Key, load: Callable[[], Awaitable[None]]) -> None:
        """Run ``load`` for ``key`` after the loads before it, unless one is pending."""
        if key in self._loading:
            return

        async def one_at_a_time() -> None:
            async with self._lane:
                await load()

        task = asyncio.create_task(one_at_a_time())
        self._loading[key] = task
        task.add_done_callback(lambda _: self._loading.pop(key, None))

    async def loaded(self) -> None:
        """Until the loads scheduled so far have ended."""
        while self._loading:
            await asyncio.gather(*self._loading.values(), return_exceptions=True)

    async def close(self) -> None:
        tasks = list(self._loading.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with self._lock:
            self._drop_all()


__all__ = ["IDLE", "LOOP_PRODUCT", "Entry", "PrincipalVectorCache", "retry_due"]
