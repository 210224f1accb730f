"""PostgreSQL pools on the event loop, for the request path's reads (recall's vector
searches, its session reads): what they share.

Autocommit: a read is one statement or one pipeline, and psycopg's own transaction around
it cost a BEGIN and a COMMIT, two more waits on the server per recall. No check on
checkout (one more wait each time, an eighth of the event loop's time at 32 clients,
profiled): a read that meets a connection PostgreSQL closed (a restart) checks the pool
instead, which replaces the dead connections, and reads once more (``once_more``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")


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
