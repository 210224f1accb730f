"""What only tests (and benchmarks) do with the memory service's stores: build the
long-term tier or Mem0's config from the service's settings, read a session's window as
the conversation store holds it, and run the pgvector backend's tenant-filtered search on
a synchronous pool."""

from __future__ import annotations

from typing import Any

from kaos_memory.settings import MemorySettings
from kaos_memory.storage.base import ConversationStore, TurnRow
from kaos_memory.storage.mem0.backend import vector_backend
from kaos_memory.storage.mem0.config import mem0_config
from kaos_memory.storage.mem0.pgvector import facts
from kaos_memory.storage.mem0.store import Mem0LongTermStore
from kaos_memory.storage.mem0.terms import Filters, Hit


def longterm_store(settings: MemorySettings) -> Mem0LongTermStore:
    """The long-term tier the service builds from ``settings`` (not started)."""
    return Mem0LongTermStore(settings.backend, settings.models, settings.tiers)


def settings_mem0_config(settings: MemorySettings) -> dict[str, Any]:
    """Mem0's config as the service makes it from ``settings``: for a test or a benchmark
    that builds Mem0's ``Memory`` over the same store itself."""
    return mem0_config(vector_backend(settings.backend, settings.models), settings.models)


async def window_rows(store: ConversationStore, key: str, limit: int) -> list[TurnRow]:
    """The newest ``limit`` unfolded turns of a session, newest first (a recall's read of
    the session's window, without the principal check)."""
    read = await store.read_session(key, None, limit, turns=True, digest=False)
    return read.turns


def pg_search(
    pool: Any, table: str, vector: list[float], filters: Filters, limit: int
) -> list[Hit]:
    """The ``limit`` nearest facts inside ``filters`` on a synchronous psycopg pool:
    ``(id, 1 - cosine distance, payload)``, the query the service sends on its own pool."""
    query, params = facts.search_query(table, vector, filters, limit)
    with pool.connection() as conn:
        rows = conn.execute(query, params).fetchall()
    return facts.hits(rows)
