"""The parts the memory service is built from, and the ones its settings ask for.

``create_app(settings, deps=...)`` takes a ``MemoryDeps``; tests build one from their own
parts (a store over their database, a clock they move, a store part that fails) instead
of copying the application's wiring.
"""

from __future__ import annotations

from dataclasses import dataclass

from kaos_memory.clock import Clock, wall_clock
from kaos_memory.settings import MemorySettings, StorageSettings
from kaos_memory.storage.base import ConversationStore, LongTermStore
from kaos_memory.storage.disabled import DisabledLongTermStore
from kaos_memory.storage.mem0.store import Mem0LongTermStore
from kaos_memory.storage.sql.store import SqlConversationStore
from kaos_memory.summarizer import Summarizer


@dataclass(frozen=True)
class MemoryDeps:
    """The parts the service is built from. Constructed without I/O; the application
    starts each one in its cleanup context and closes it on the way out."""

    conversation: ConversationStore
    longterm: LongTermStore
    summarizer: Summarizer
    clock: Clock = wall_clock


def conversation_store(storage: StorageSettings, clock: Clock = wall_clock) -> ConversationStore:
    if storage.mode == "local":
        from kaos_memory.storage.sql.sqlite import SqliteDialect

        return SqlConversationStore(SqliteDialect(storage.sqlite_path), clock=clock)
    from kaos_memory.storage.sql.postgres import PostgresDialect

    assert storage.dsn is not None
    dialect = PostgresDialect(storage.dsn, pool_size=storage.pg_pool_size)
    return SqlConversationStore(dialect, clock=clock)


def default_deps(settings: MemorySettings, clock: Clock = wall_clock) -> MemoryDeps:
    """The parts the settings ask for: SQLite or PostgreSQL, Mem0 (or no long-term tier),
    the summarisation endpoint."""
    models = settings.models
    longterm: LongTermStore = (
        Mem0LongTermStore(settings.backend, models, settings.tiers)
        if settings.tiers.long_term_enabled
        else DisabledLongTermStore()
    )
    return MemoryDeps(
        conversation=conversation_store(settings.backend, clock),
        longterm=longterm,
        summarizer=Summarizer(
            models.summarization_base_url,
            models.summarization_model,
            models.summarization_api_key,
            models.timeout,
            system_prompt=models.digest_prompt,
            max_tokens=settings.tiers.digest_max_tokens,
        ),
        clock=clock,
    )
