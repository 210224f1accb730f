"""PostgreSQL pools on the event loop, for the request path's reads (recall's vector
searches, its session reads): what they share.

Autocommit: a read is one statement or one pipeline, and psycopg's own transaction around
it cost a BEGIN and a COMMIT, two more waits on the server per recall. No check on
checkout (one more wait each time, which showed in the event loop's profile under
concurrent recalls): a read that meets a connection PostgreSQL closed (a restart) checks
the pool instead, which replaces the dead connections, and reads once more
(``once_more``).

Concurrent reads share round trips (``Coalesced``): the reads requested in one turn of the
event loop go to the server as one pipeline on one connection. Each round trip costs the
client a pool checkout, the pipeline's set-up and the waits on the socket, whatever it
carries; shared by the recalls that are ready together, that cost is paid once a turn
instead of once a search. The figures: docs/benchmarks.md, "Measured figures behind the
design".
"""

from __future__ import annotations

import asyncio
from asyncio import Future
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")

# A statement and its parameters; a read is a group of them, run in one snapshot.
Statement = tuple[Any, Sequence[Any] | None]
Rows = list[Any]
# A read waiting to be sent: its statements, and the future its caller awaits.
Waiting = tuple[Sequence[Statement], "Future[list[Rows]]"]
# Reads sent in one pipeline at most (more wait for the next, on another connection).
MAX_BATCH = 64


async def open_pool(
    dsn: str,
    max_size: int,
    configure: Callable[[Any], Awaitable[None]] | None = None,
) -> AsyncConnectionPool[Any]:
    """An open pool of up to ``max_size`` autocommit connections (one opened now)."""
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        dsn,
        kwargs={"autocommit": True},
        configure=configure,
        min_size=1,
        max_size=max_size,
        open=False,
        timeout=10.0,
    )
    await pool.open(wait=True, timeout=30.0)
    return pool


async def once_more(pool: AsyncConnectionPool[Any], read: Callable[[], Awaitable[T]]) -> T:
    """``read()``; after a connection the server closed, the pool checked and ``read()``
    once more. A server still down fails that one too."""
    try:
        return await read()
    except psycopg.OperationalError:
        await pool.check()
        return await read()


class Coalesced:
    """Reads on ``pool`` (closed with them) that share round trips: the groups of
    statements requested in one turn of the event loop are sent as one pipeline on one
    connection.

    A pipeline has one Sync, so the server runs it as one implicit transaction: each
    group's statements still see one snapshot (they see the others' too, all reads).
    A group that fails aborts that transaction for the groups sent with it, so after a
    failed pipeline each group is read again on its own (``once_more``: after a restart
    the pool is checked first), and fails alone if it fails. A caller that stops waiting
    (a recall's timeout) leaves its statements to the pipeline, which is not interrupted.
    """

    def __init__(self, pool: AsyncConnectionPool[Any]) -> None:
        self.pool = pool
        self._pending: list[Waiting] = []
        self._flushing = False
        self._sending: dict[asyncio.Task[None], list[Waiting]] = {}

    async def read(self, statements: Sequence[Statement]) -> list[Rows]:
        """The rows of each statement, in order."""
        loop = asyncio.get_running_loop()
        future: Future[list[Rows]] = loop.create_future()
        self._pending.append((statements, future))
        if not self._flushing:
            self._flushing = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._flushing = False
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), MAX_BATCH):
            batch = pending[start : start + MAX_BATCH]
            task = asyncio.create_task(self._send(batch))
            self._sending[task] = batch
            task.add_done_callback(lambda t: self._sending.pop(t, None))

    async def _send(self, batch: list[Waiting]) -> None:
        try:
            await self._answer([(statements, f) for statements, f in batch if not f.done()])
        except Exception as exc:  # noqa: BLE001  (handed to the callers that wait for it)
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
        finally:
            _cancel(batch)  # closing: nobody waits forever

    async def _answer(self, batch: list[Waiting]) -> None:
        if not batch:
            return
        try:
            results = await self._pipeline([statements for statements, _ in batch])
        except psycopg.Error:
            # Each group on its own: one that fails does not fail the others.
            for statements, future in batch:
                if not future.done():
                    await self._alone(statements, future)
            return
        for (_, future), rows in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(rows)

    async def _alone(self, statements: Sequence[Statement], future: Future[list[Rows]]) -> None:
        try:
            (rows,) = await once_more(self.pool, lambda: self._pipeline([statements]))
        except psycopg.Error as exc:
            if not future.done():
                future.set_exception(exc)
        else:
            if not future.done():
                future.set_result(rows)

    async def _pipeline(self, groups: Sequence[Sequence[Statement]]) -> list[list[Rows]]:
        async with self.pool.connection() as conn:
            async with conn.pipeline():
                cursors = [[await conn.execute(q, p) for q, p in group] for group in groups]
            return [[await cur.fetchall() for cur in group] for group in cursors]

    async def close(self) -> None:
        """Stop what is being sent, fail what waits (its callers see a cancellation), and
        close the pool."""
        sending = dict(self._sending)
        for task in sending:
            task.cancel()
        await asyncio.gather(*sending, return_exceptions=True)
        # A task cancelled before it began never ran its own clean-up.
        for batch in sending.values():
            _cancel(batch)
        _cancel(self._pending)
        self._pending.clear()
        await self.pool.close()


def _cancel(batch: list[Waiting]) -> None:
    for _, future in batch:
        if not future.done():
            future.cancel()
