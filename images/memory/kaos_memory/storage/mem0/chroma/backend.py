"""The Chroma backend (local mode): Mem0's embedded Chroma collection, with KAOS's listing
index beside it (``facts``), the per-principal vector cache (``cache``) and the purges of
erased text from Chroma's files (``files``).

Searches run on recall lanes of their own (threads apart from Mem0's), so extractions
waiting on a slow model never hold a recall up. A search names the scope's ids from the
listing index (cost grows with the tenant, not the store) or, while the index is not known
complete, filters in Chroma; a cached principal is answered from memory.

This process is Chroma's only writer: every change goes through ``write`` and ``delete``,
which keep the listing index and the cache in step.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from kaos_memory.settings import StorageSettings
from kaos_memory.storage.mem0.chroma import facts
from kaos_memory.storage.mem0.chroma.cache import (
    ChromaPrincipalCache,
    principal_key,
    read,
    supported,
)
from kaos_memory.storage.mem0.chroma.files import in_child, vacuum_sqlite
from kaos_memory.storage.mem0.terms import GROUP_KEY, WILDCARD, Filters, Hit, Key, Position, Row

log = logging.getLogger(__name__)


def _chroma_internal_error() -> type[BaseException]:
    """Chroma's ``InternalError``, looked up once Chroma is loaded (a search runs only on a
    started store). Mem0 imports Chroma when the store starts, never this module: Chroma
    loads the OpenTelemetry SDK on import, which a service built without tracing (or a
    store built but not started) must not pay for."""
    error: type[BaseException] = sys.modules["chromadb.errors"].InternalError
    return error


# Chroma's own SQLite file, in its directory.
CHROMA_FILE = "chroma.sqlite3"
# The most facts a count reads through Chroma while the listing index is not complete.
COUNT_SCAN_LIMIT = 1_000_000


class ChromaBackend:
    """``VectorBackend`` over Mem0's Chroma store."""

    def __init__(self, storage: StorageSettings) -> None:
        self._collection = storage.collection
        self._dir = storage.chroma_dir
        self._history = storage.mem0_history_path
        self._cache_bytes = storage.vector_cache_mb * 2**20
        # As many recall lanes as Mem0 has threads.
        self._threads = storage.mem0_threads
        self._memory: Any = None
        # The per-principal vector cache (unless its budget is 0).
        self.cache: ChromaPrincipalCache | None = None
        # The listing index's reads of a search (``facts.IndexReader``).
        self._index: facts.IndexReader | None = None
        self._lanes: ThreadPoolExecutor | None = None

    @property
    def memory(self) -> Any:
        if self._memory is None:
            raise RuntimeError("long-term store is not started")
        return self._memory

    # --- lifecycle ------------------------------------------------------------------------

    def mem0_config(self) -> dict[str, Any]:
        return {
            "vector_store": {
                "provider": "chroma",
                "config": {"collection_name": self._collection, "path": str(self._dir)},
            },
            "history_db_path": str(self._history),
        }

    def build(self, memory: Any) -> None:
        # Deleted history and message rows are overwritten, not left in free pages.
        with memory.db._lock:
            memory.db.connection.execute("PRAGMA secure_delete=ON")
        # The listing index: facts written before it, or by a write cut short by a crash,
        # are indexed now.
        facts.reconcile(memory)
        self._index = facts.IndexReader(memory)
        if self._cache_bytes > 0 and supported(memory):
            self.cache = ChromaPrincipalCache(self._cache_bytes, functools.partial(read, memory))
        self._memory = memory

    async def start(self) -> None:
        self._lanes = ThreadPoolExecutor(
            max_workers=self._threads, thread_name_prefix="kaos-recall"
        )

    async def close(self) -> None:
        cache, self.cache = self.cache, None
        if cache is not None:
            await cache.close()
        lanes, self._lanes = self._lanes, None
        if lanes is not None:
            lanes.shutdown(wait=False, cancel_futures=True)
        index, self._index = self._index, None
        if index is not None:
            index.close()
        self._memory = None

    # --- reads ----------------------------------------------------------------------------

    def holds_none(self, filters: Filters) -> bool:
        # The held principals are the store's own (one replica writes a local store), and a
        # change drops its principal's entry before Chroma sees it.
        if self.cache is None:
            return False
        key = principal_key(filters)
        return key is not None and self.cache.holds_none(key, filters)

    async def search(
        self, query: str, vector: list[float], filters: Filters, size: int
    ) -> list[Hit]:
        if self._lanes is None:
            raise RuntimeError("long-term store is not started")
        if self.cache is not None:
            key = principal_key(filters)
            if key is not None:
                hits = await self.cache.search(key, filters, vector, size)
                if hits is not None:
                    return hits
        return await asyncio.get_running_loop().run_in_executor(
            self._lanes, self.query, query, vector, filters, size
        )

    def query(self, query: str, vector: list[float], filters: Filters, size: int) -> list[Hit]:
        """The scope's ``size`` nearest facts, asking Chroma: by the ids the listing index
        holds for the scope (``facts.IndexReader``: cost grows with the tenant, not the
        store), else by Chroma's own filter. Either way the store re-checks the scope."""
        store = self.memory.vector_store
        index = self._index
        if index is None:
            raise RuntimeError("long-term store is not started")
        # The collection is the group, so Chroma is never asked to match the group key;
        # a scope without a tenant key (the whole store) needs no ids either.
        tenant = {k: v for k, v in filters.items() if k != GROUP_KEY}
        bounded = any(v != WILDCARD for v in tenant.values())
        ids = index.scope_ids(filters) if bounded else None
        if ids == []:
            return []
        hits = None
        if ids is not None:
            try:
                found = store.collection.query(
                    query_embeddings=[vector],
                    ids=ids,
                    n_results=min(size, len(ids)),
                    include=["metadatas", "distances"],
                )
            except _chroma_internal_error():
                # An indexed id Chroma no longer has (deleted behind KAOS's back): this
                # search filters in Chroma; a listing page or the next start repairs it.
                log.warning("searching by indexed ids failed; filtering in Chroma")
            else:
                hits = store._parse_output(found)
        if hits is None:
            hits = store.search(query=query, vectors=vector, top_k=size, filters=tenant or None)
        return [(str(h.id), h.score or 0.0, h.payload) for h in hits]

    def page(self, filters: Filters, limit: int, after: Position | None) -> Sequence[Row]:
        return facts.page(self.memory, filters, limit, after)

    def select(self, filters: Filters, limit: int) -> Sequence[Row]:
        # The payloads as stored (an erasure selects facts whose key is already shredded):
        # past the sealing wrapper, when there is one (``sealed``).
        store = self.memory.vector_store
        listed = getattr(store, "inner", store).list(filters=filters, top_k=limit)
        if listed and isinstance(listed[0], list):
            listed = listed[0]
        return [(str(r.id), r.payload) for r in listed]

    def count(self, filters: Filters) -> int:
        # The listing index answers from its filter shape's index; until it is known
        # complete, Chroma's own filtered listing does.
        ids = facts.scope_ids(self.memory, filters)
        if ids is None:
            return len(self.select(filters, COUNT_SCAN_LIMIT))
        return len(ids)

    def ping(self) -> None:
        self.memory.vector_store.collection.count()

    def stats(self) -> tuple[int, int]:
        return (0, 0) if self.cache is None else self.cache.stats()

    # --- changes --------------------------------------------------------------------------

    def write(self, principal: Key | None, add: Callable[[], list[str]]) -> list[str]:
        # Mem0's inference changes only facts under the same principal's id; without a
        # principal, any.
        with self._changing(principal):
            try:
                ids = add()
            except BaseException:
                # Mem0 may have stored facts before it failed, and their ids are lost.
                self._index_stale()
                raise
            try:
                facts.record(self.memory, ids)
            except Exception:
                # The facts are stored: failing the write would store them twice on retry.
                log.warning("indexing new facts failed", exc_info=True)
                self._index_stale()
        return ids

    def delete(self, rows: Sequence[Row]) -> int:
        ids = [fact_id for fact_id, _ in rows]
        if not ids:
            return 0
        # Out of the listing index first: a search names indexed ids, and Chroma refuses
        # an id it does not hold (a fact whose deletion then fails is indexed again by the
        # next reconcile: the count check of a listing page, or the next start).
        facts.forget(self.memory, ids)
        count = sum(self._delete_one(fact_id) for fact_id in ids)
        in_child("chroma-log", self._dir / CHROMA_FILE, ids)
        return count

    def _delete_one(self, fact_id: str) -> bool:
        try:
            # Whose fact it is, the deletion does not say: every cached principal is dropped.
            with self._changing(None):
                self.memory.delete(fact_id)
        except ValueError:
            return False  # already gone: another erasure got there first
        return True

    def reclaim(self) -> None:
        in_child("vacuum", self._dir / CHROMA_FILE)
        vacuum_sqlite(facts.index_file(self.memory))

    def _changing(self, principal: Key | None) -> AbstractContextManager[None]:
        """Bracket a change of Chroma's facts for the cache: of ``principal``'s facts, or
        of anyone's (None)."""
        if self.cache is None:
            return nullcontext()
        return self.cache.changing(principal)

    def _index_stale(self) -> None:
        """Have the next listing reconcile the listing index first."""
        try:
            facts.mark_stale(self.memory)
        except Exception:
            # The periodic count check and the next start reconcile it anyway.
            log.warning("marking the listing index stale failed", exc_info=True)


__all__ = ["CHROMA_FILE", "ChromaBackend"]
