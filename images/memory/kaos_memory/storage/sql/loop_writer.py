"""Short write transactions on the event loop (``LoopWrites``), and the checkpoints they
leave to the store's thread.

A window append is a few indexed statements: on SQLite it takes less time than the hop to
the writer's thread and back (a thread wake-up each way, and the GIL handed over twice).
When the store's thread is idle and the database's write lock is free it runs on the
loop's own connection at once; otherwise (the thread has work, or another process holds
the lock: ``WriterBusy``) it goes to the thread, in line. The loop's connection never
checkpoints, since a checkpoint may wait on the disk, so every ``CHECKPOINT_EVERY``
appends the thread makes one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Concatenate, ParamSpec, TypeVar

from kaos_memory.clock import Clock
from kaos_memory.storage.sql.dialect import LoopWrites, Tx

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")

# An append writes about a dozen pages to the log: this keeps it near the size at which
# SQLite checkpoints by itself (a thousand pages).
CHECKPOINT_EVERY = 100


class LoopWriter:
    def __init__(
        self,
        dialect: LoopWrites,
        hop: Callable[[Callable[[], None]], Awaitable[None]],
        clock: Clock,
    ) -> None:
        self._dialect = dialect
        self._hop = hop
        self._clock = clock
        self._since_checkpoint = 0
        self._checkpoint: asyncio.Future[None] | None = None

    async def run(self, fn: Callable[Concatenate[Tx, P], T], /, *a: P.args, **k: P.kwargs) -> T:
        """``fn(tx, ...)`` in one transaction on the loop; ``WriterBusy`` when the write lock
        is held elsewhere (nothing was run)."""
        with self._dialect.transaction_now() as cur:
            result = fn(Tx(cur, self._dialect, self._clock()), *a, **k)
        self._since_checkpoint += 1
        if self._since_checkpoint >= CHECKPOINT_EVERY and self._checkpoint is None:
            self._since_checkpoint = 0
            self._checkpoint = asyncio.ensure_future(self._hop(self._dialect.checkpoint))
            self._checkpoint.add_done_callback(self._checkpointed)
        return result

    async def settled(self) -> None:
        """Once the checkpoint under way (if any) has ended: before the store closes."""
        if self._checkpoint is not None:
            await asyncio.wait([self._checkpoint])

    def _checkpointed(self, done: asyncio.Future[None]) -> None:
        self._checkpoint = None
        if not done.cancelled() and (exc := done.exception()) is not None:
            # The next one tries again; the log keeps every page until then.
            log.warning("WAL checkpoint failed", exc_info=exc)
