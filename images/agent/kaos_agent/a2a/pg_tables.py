"""The agent's own tables in PostgreSQL (the A2A task store, the triggers' delivery log): a
small pool of autocommit connections, each operation one transaction on it, and the
schema created at start under a transaction-scoped advisory lock, so replicas starting
together create it once. The DSN is the caller's secret: never logged nor repeated here.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool

from kaos_agent.a2a.tasks import TaskStoreUnavailable

log = logging.getLogger(__name__)

POOL_SIZE = 4
# How long one operation waits for a free connection of the pool.
CONNECTION_WAIT_SECONDS = 10.0

Migrate = Callable[[psycopg.AsyncCursor[Any]], Any]


@contextlib.contextmanager
def driver_errors(what: str, operation: str) -> Iterator[None]:
    """A driver error as ``TaskStoreUnavailable``, logged by class and SQLSTATE only (its
    text may quote the DSN or a row)."""
    try:
        yield
    except psycopg.Error as exc:
        log.warning(
            f"{what} operation failed",
            extra={"operation": operation, "error": type(exc).__name__, "sqlstate": exc.sqlstate},
        )
        raise TaskStoreUnavailable() from None


class PgTables:
    def __init__(self, dsn: str, *, what: str, size: int = POOL_SIZE) -> None:
        self._dsn = dsn
        self._what = what
        self._size = size
        self._pool: AsyncConnectionPool[Any] | None = None

    def __repr__(self) -> str:  # never the DSN
        return f"PgTables({self._what})"

    async def start(
        self, lock: str, schema: Sequence[str], wait: float, migrate: Migrate | None = None
    ) -> None:
        """Open the pool (waiting up to ``wait`` seconds for a first connection) and run
        ``schema`` (then ``migrate``, given the cursor) in one transaction under the
        advisory lock named ``lock``."""
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            self._dsn,
            kwargs={"autocommit": True},
            min_size=1,
            max_size=self._size,
            open=False,
            timeout=CONNECTION_WAIT_SECONDS,
        )
        await pool.open(wait=True, timeout=wait)
        self._pool = pool
        async with self.transaction() as cur:
            await cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (lock,))
            for statement in schema:
                await cur.execute(statement)
            if migrate is not None:
                await migrate(cur)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[psycopg.AsyncCursor[Any]]:
        if self._pool is None:
            raise RuntimeError(f"the {self._what} is not started")
        async with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur
