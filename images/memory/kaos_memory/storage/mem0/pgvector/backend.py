"""The pgvector backend (external mode): Mem0's PostgreSQL table, with KAOS's own queries
on it (``facts``: tenant indexes, a table partitioned by principal, principal versions)
and the per-principal vector cache (``cache``).

Mem0's own pool is synchronous: listing, deletion and vacuum use it on the store's
threads. Searches go through a pool of their own on the event loop (``pgpool``), whose
concurrent reads share round trips, so no thread waits per query. External mode keeps no
Mem0 history (``history.null_history``): it would be node-local state on an ephemeral
disk.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from kaos_memory.settings import ModelSettings, StorageSettings
from kaos_memory.storage import pgpool
from kaos_memory.storage.errors import StorageUnavailable
from kaos_memory.storage.mem0.history import null_history
from kaos_memory.storage.mem0.pgvector import facts
from kaos_memory.storage.mem0.pgvector.cache import PgvectorPrincipalCache, principal_of
from kaos_memory.storage.mem0.pgvector.connection import pgvector_dsn, search_connection
from kaos_memory.storage.mem0.terms import WILDCARD, Filters, Hit, Key, Position, Row

log = logging.getLogger(__name__)


class PgvectorBackend:
    """``VectorBackend`` over Mem0's pgvector store."""

    def __init__(self, storage: StorageSettings, models: ModelSettings) -> None:
        assert storage.dsn is not None
        self._dsn = storage.dsn
        self._table = storage.collection
        self._dims = models.embedding_dims
        self._partitions = storage.pg_partitions
        self._pool_size = storage.pg_pool_size
        self._cache_bytes = storage.vector_cache_mb * 2**20
        self._memory: Any = None
        # The per-principal vector cache (once the principal versions exist).
        self.cache: PgvectorPrincipalCache | None = None
        self._reads: pgpool.Coalesced | None = None

    @property
    def memory(self) -> Any:
        if self._memory is None:
            raise RuntimeError("long-term store is not started")
        return self._memory

    # --- lifecycle ------------------------------------------------------------------------

    def mem0_config(self) -> dict[str, Any]:
        return {
            "vector_store": {
                "provider": "pgvector",
                "config": {
                    "connection_string": pgvector_dsn(self._dsn),
                    "collection_name": self._table,
                    "embedding_model_dims": self._dims,
                    "hnsw": True,
                },
            },
            # External mode keeps no node-local history (``null_history``).
            "history_db_path": ":memory:",
        }

    def build(self, memory: Any) -> None:
        memory.db.close()
        memory.db = null_history()
        # Mem0 builds its pgvector pool without a connection check, so after a PostgreSQL
        # restart it would hand out dead connections until each failed once; checking on
        # checkout makes the tier recover by itself.
        pool = getattr(memory.vector_store, "connection_pool", None)
        if pool is not None and hasattr(pool, "_check"):
            pool._check = ConnectionPool.check_connection
        if pool is not None:
            self._prepare_table(memory.vector_store, pool)
        self._memory = memory

    def _prepare_table(self, store: Any, pool: Any) -> None:
        # Mem0 creates its table on first use; the indexes need it now. A new table is
        # partitioned by principal first.
        if self._partitions > 0:
            facts.create_partitioned(store, self._dims, self._partitions)
        store._ensure_collection()
        try:
            facts.ensure_indexes(pool, self._table)
        except psycopg.Error:
            # Two replicas creating the same index at once: one loses the race. Searches
            # stay correct without them, only slower; the next start creates them.
            log.warning("creating the tenant indexes failed", exc_info=True)
        if self._cache_bytes <= 0:
            return
        try:
            facts.ensure_versions(pool, self._table)
        except psycopg.Error:
            # Without the versions nothing cached could be checked: every search stays in
            # the database.
            log.warning("creating the principal versions failed", exc_info=True)
        else:
            self.cache = PgvectorPrincipalCache(self._table, self._cache_bytes)

    async def start(self) -> None:
        # Searches on the event loop: no thread per waiting query (``pgpool``).
        try:
            pool = await pgpool.open_pool(
                pgvector_dsn(self._dsn), self._pool_size, configure=search_connection
            )
        except Exception as exc:
            raise StorageUnavailable("long-term store unavailable") from exc
        self._reads = pgpool.Coalesced(pool)

    async def close(self) -> None:
        cache, self.cache = self.cache, None
        if cache is not None:
            await cache.close()
        reads, self._reads = self._reads, None
        if reads is not None:
            await reads.close()
        memory, self._memory = self._memory, None
        pool = None if memory is None else getattr(memory.vector_store, "connection_pool", None)
        if pool is not None:
            await asyncio.to_thread(_close_pool, pool)

    # --- reads ----------------------------------------------------------------------------

    def holds_none(self, filters: Filters) -> bool:
        # Other replicas write the same table: only the database knows (and a principal's
        # vectors are held only from ``MIN_FACTS`` facts on).
        return False

    async def search(
        self, query: str, vector: list[float], filters: Filters, size: int
    ) -> list[Hit]:
        if self._reads is None:
            raise RuntimeError("long-term store is not started")
        # A float32 array: sent as pgvector's binary vector (``search_connection``).
        statement, params = facts.search_query(
            self._table, np.asarray(vector, dtype=np.float32), filters, size
        )
        # A principal's whole scope: its vectors may be cached.
        key = principal_of(filters) if self.cache is not None else None
        if self.cache is not None and key is not None:
            rows = await self.cache.search(self._reads, key, vector, statement, params, size)
        else:
            (rows,) = await self._reads.read([(statement, params)])
        return facts.hits(rows)

    def page(self, filters: Filters, limit: int, after: Position | None) -> Sequence[Row]:
        """Through KAOS's indexes with the keys as literals (``facts.page``), one partition
        for a principal, where Mem0's own listing binds the keys and so reads every row of
        the store."""
        store = self.memory.vector_store
        return facts.page(store.connection_pool, store.collection_name, filters, limit, after)

    def select(self, filters: Filters, limit: int) -> Sequence[Row]:
        return self.page(filters, limit, None)

    def count(self, filters: Filters) -> int:
        store = self.memory.vector_store
        return facts.count(store.connection_pool, store.collection_name, filters)

    def ping(self) -> None:
        self.memory.vector_store.list(filters={"run_id": WILDCARD}, top_k=1)

    def stats(self) -> tuple[int, int]:
        return (0, 0) if self.cache is None else self.cache.stats()

    # --- changes --------------------------------------------------------------------------

    def write(self, principal: Key | None, add: Callable[[], list[str]]) -> list[str]:
        # The principal versions' triggers see every change, whoever makes it.
        return add()

    def delete(self, rows: Sequence[Row]) -> int:
        """Naming their principals (``facts.delete``). What Mem0's delete does besides is
        switched off in external mode (history) or has nothing to do: Mem0 links entities
        only with spaCy, which the image does not ship, so its entity store stays empty."""
        store = self.memory.vector_store
        return facts.delete(store.connection_pool, store.collection_name, list(rows))

    def reclaim(self) -> None:
        pool = getattr(self.memory.vector_store, "connection_pool", None)
        if pool is None:
            return
        tables = [self._table, f"{self._table}_entities"]
        with pool.connection() as conn:
            conn.autocommit = True
            try:
                for table in tables:
                    if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
                        continue
                    conn.execute(sql.SQL("VACUUM {}").format(sql.Identifier(table)))
            finally:
                conn.autocommit = False


def _close_pool(pool: Any) -> None:
    try:
        pool.close()
    except Exception:
        log.warning("closing the pgvector pool failed", exc_info=True)


__all__ = ["PgvectorBackend"]
