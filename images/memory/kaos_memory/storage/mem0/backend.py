"""The one interface between the long-term store and its vector store, and the choice of
implementation by storage mode.

Mem0 writes and extracts; what KAOS does on the vector store beside Mem0 (searching a
scope, listing it in order, deleting, purging, reclaiming, a per-principal vector cache)
differs per backend, and each implementation keeps it in one place: ``chroma`` (embedded
Chroma, local mode) and ``pgvector`` (PostgreSQL, external mode). The store only ever
calls this protocol.

Synchronous methods block (Mem0, Chroma and psycopg's pool are synchronous): the store
calls them on its worker threads, never on the event loop. Asynchronous ones run on the
event loop. Constructors do no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kaos_memory.settings import ModelSettings, StorageSettings
from kaos_memory.storage.mem0.terms import Filters, Hit, Key, Position, Row


class VectorBackend(Protocol):
    def mem0_config(self) -> dict[str, Any]:
        """The sections of Mem0's config the backend decides: ``vector_store`` and
        ``history_db_path``."""
        ...

    def build(self, memory: Any) -> None:
        """Complete Mem0's ``Memory``, just built over this backend, with what KAOS adds
        (indexes, tables, the per-principal vector cache); blocking."""
        ...

    async def start(self) -> None:
        """Open what searches use (their own lanes or pool), after ``build``."""
        ...

    def holds_none(self, filters: Filters) -> bool:
        """Whether the service knows, without I/O, that no fact is inside ``filters`` (a
        search then needs no query embedding); False when it does not know."""
        ...

    async def search(
        self, query: str, vector: list[float], filters: Filters, size: int
    ) -> list[Hit]:
        """The ``size`` nearest facts inside ``filters``, nearest first (``query`` is the
        text ``vector`` embeds)."""
        ...

    def page(self, filters: Filters, limit: int, after: Position | None) -> Sequence[Row]:
        """Up to ``limit`` facts inside ``filters`` in ``(created_at, id)`` order, strictly
        after ``after``; blocking."""
        ...

    def select(self, filters: Filters, limit: int) -> Sequence[Row]:
        """Up to ``limit`` facts matching ``filters`` (any payload keys), in no given
        order; blocking."""
        ...

    def count(self, filters: Filters) -> int:
        """How many facts are inside ``filters`` (a scope's filter); blocking."""
        ...

    def write(self, principal: Key | None, add: Callable[[], list[str]]) -> list[str]:
        """Run ``add`` (Mem0's write, which may change ``principal``'s facts, or anyone's
        for None) and keep what the backend keeps beside Mem0 in step; the ids ``add``
        stored. Blocking."""
        ...

    def delete(self, rows: Sequence[Row]) -> int:
        """Delete facts (their payloads, where known, name their principals) and purge
        the backend's own copies of their text; how many were still there. Blocking."""
        ...

    def reclaim(self) -> None:
        """Make deleted facts unreadable in the store's files where it can; blocking."""
        ...

    def ping(self) -> None:
        """One cheap read: raises if the store does not answer; blocking."""
        ...

    def stats(self) -> tuple[int, int]:
        """Principals whose vectors the cache holds, and those being loaded or waiting."""
        ...

    async def close(self) -> None:
        """Close what ``build`` and ``start`` opened (whichever ran)."""
        ...


def vector_backend(storage: StorageSettings, models: ModelSettings) -> VectorBackend:
    """The backend of ``storage``'s mode: Chroma in local mode, pgvector in external mode."""
    # Each implementation imports its own driver (chromadb, or psycopg and pgvector):
    # only the configured mode's is loaded.
    if storage.mode == "local":
        from kaos_memory.storage.mem0.chroma.backend import ChromaBackend

        return ChromaBackend(storage)
    from kaos_memory.storage.mem0.pgvector.backend import PgvectorBackend

    return PgvectorBackend(storage, models)
