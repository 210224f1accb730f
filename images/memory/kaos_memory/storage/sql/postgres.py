"""PostgreSQL dialect of the conversational tiers (external mode), on the pgvector database.

Transactions (writes, folds, leases, erasure) run on a ``psycopg_pool.ConnectionPool``
from the store's small thread pool. Fold and digest work on one key takes a
transaction-scoped advisory lock on the key's hash, so several replicas on one database
serialise their folds of a session instead of double-folding.

A recall's read of a session (window and digest) runs on the event loop instead, on an
``AsyncConnectionPool`` of its own (``read_async``): under concurrent recalls the hop to a
thread and back, the pool's check of every connection it hands out (one more wait on the
server) and psycopg's transaction around the read were a large share of the service's time
(profiled; the figures: docs/benchmarks.md, "Measured figures behind the design"). The
read pool is ``storage.pgpool``'s: autocommit, unchecked, a read that meets a connection
PostgreSQL closed (a restart) reads once more, and the reads of concurrent recalls share
round trips (``pgpool.Coalesced``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from psycopg_pool import ConnectionPool

from kaos_memory.storage import pgpool
from kaos_memory.storage.sql.dialect import ColumnTypes, Cursor, Statement

TYPES = ColumnTypes(
    identity="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    bigint="BIGINT",
    boolean="BOOLEAN",
    double="DOUBLE PRECISION",
)

# The tables an erasure deletes rows of (vacuumed after it, see ``reclaim``).
RECLAIMED_TABLES = (
    "kaos_mem_turns",
    "kaos_mem_digests",
    "kaos_mem_folds",
    "kaos_mem_attribution",
    "kaos_mem_sessions",
)

# Serialises concurrent schema migrations by several replicas starting at once.
_SCHEMA_LOCK = 0x6B616F73  # "kaos"


class PostgresDialect:
    types = TYPES

    def __init__(self, dsn: str, *, pool_size: int) -> None:
        self.dsn = dsn
        self.threads = pool_size
        self._pool: ConnectionPool[Any] | None = None
        self._reads: pgpool.Coalesced | None = None

    def open(self) -> None:
        # Checked on checkout: after a PostgreSQL restart the pool's connections are dead,
        # and without the check every one of them would fail a request before recovery.
        pool: ConnectionPool[Any] = ConnectionPool(
            self.dsn,
            min_size=1,
            max_size=self.threads,
            open=False,
            timeout=10.0,
            check=ConnectionPool.check_connection,
        )
        pool.open(wait=True, timeout=30.0)
        self._pool = pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    async def open_async(self) -> None:
        """The read pool (``read_async``), on the running event loop."""
        self._reads = pgpool.Coalesced(await pgpool.open_pool(self.dsn, self.threads))

    async def close_async(self) -> None:
        reads, self._reads = self._reads, None
        if reads is not None:
            await reads.close()

    async def read_async(self, statements: Sequence[Statement]) -> list[list[Any]]:
        """``read`` on the event loop, on the read pool; the statements see one snapshot."""
        if self._reads is None:
            raise RuntimeError("postgres store is not open")
        return await self._reads.read([(self.sql(t), p) for t, p in statements])

    def sql(self, text: str) -> str:
        return text

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        if self._pool is None:
            raise RuntimeError("postgres store is not open")
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    def read(self, statements: Sequence[Statement]) -> list[list[Any]]:
        if self._pool is None:
            raise RuntimeError("postgres store is not open")
        with self._pool.connection() as conn:
            # Autocommit in a pipeline: no BEGIN or COMMIT of the client's, and the server
            # runs everything up to the pipeline's one Sync as one implicit transaction.
            conn.autocommit = True
            try:
                with conn.pipeline():
                    cursors = [conn.execute(self.sql(t), p) for t, p in statements]
                return [cur.fetchall() for cur in cursors]
            finally:
                # A broken connection refuses the setter; the pool discards it anyway.
                with suppress(Exception):
                    conn.autocommit = False

    def lock_schema(self, cur: Cursor) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))

    def lock_key(self, cur: Cursor, key: str) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))

    def try_lock_key(self, cur: Cursor, key: str) -> bool:
        cur.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
        row = cur.fetchone()
        return bool(row and row[0])

    def reclaim(self) -> None:
        # Deleted rows stay in the table files as dead tuples until a vacuum; VACUUM runs
        # outside a transaction, so on a connection switched to autocommit for it.
        if self._pool is None:
            raise RuntimeError("postgres store is not open")
        with self._pool.connection() as conn:
            conn.autocommit = True
            try:
                for table in RECLAIMED_TABLES:
                    conn.execute(f"VACUUM {table}")
            finally:
                conn.autocommit = False
