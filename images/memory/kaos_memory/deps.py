"""The parts the memory service is built from, and the ones its settings ask for.

``create_app(settings, deps=...)`` takes a ``MemoryDeps``; tests build one from their own
parts (a store over their database, a clock they move, a store part that fails) instead
of copying the application's wiring.
"""

from __future__ import annotations

from dataclasses import dataclass

from kaos_memory.clock import Clock, wall_clock
from kaos_memory.crypto.kek import KeyEncryptionKey, SecretFileKek
from kaos_memory.crypto.keyring import DEFAULT_CAPACITY, Keyring
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
    # Set when texts are sealed (``crypto``): the forget shreds a principal's key with it.
    keyring: Keyring | None = None


def key_encryption_key(settings: MemorySettings) -> KeyEncryptionKey | None:
    """The KEK the settings name, None when texts are stored in the clear: the mounted
    Secret's versioned directory, or a KMS key per owner of this store (named by its
    namespace, name and group, so stores sharing a KMS account never share a key)."""
    encryption = settings.encryption
    if not encryption.enabled:
        return None
    if encryption.kek == "kms":
        access = settings.admin_access
        parts = (access.store_namespace, access.store_name, settings.backend.group)
        return settings.kms.kek("/".join(p for p in parts if p))
    assert encryption.kek_dir is not None  # checked when the settings loaded
    kek = SecretFileKek(encryption.kek_dir)
    kek.load()
    return kek


def conversation_store(
    storage: StorageSettings,
    clock: Clock = wall_clock,
    kek: KeyEncryptionKey | None = None,
    key_cache: int = DEFAULT_CAPACITY,
) -> SqlConversationStore:
    """The SQL store of the storage mode; sealing texts under keys ``kek`` wraps when given
    (``store.keyring``)."""
    if storage.mode == "local":
        from kaos_memory.storage.sql.sqlite import SqliteDialect

        store = SqlConversationStore(SqliteDialect(storage.sqlite_path), clock=clock)
    else:
        from kaos_memory.storage.sql.postgres import PostgresDialect

        assert storage.dsn is not None
        dialect = PostgresDialect(storage.dsn, pool_size=storage.pg_pool_size)
        store = SqlConversationStore(dialect, clock=clock)
    if kek is not None:
        store.encrypt(storage.group, kek, key_cache)
    return store


def default_deps(settings: MemorySettings, clock: Clock = wall_clock) -> MemoryDeps:
    """The parts the settings ask for: SQLite or PostgreSQL, Mem0 (or no long-term tier),
    the summarisation endpoint."""
    models = settings.models
    conversation = conversation_store(
        settings.backend, clock, key_encryption_key(settings), settings.encryption.key_cache
    )
    longterm: LongTermStore = (
        Mem0LongTermStore(settings.backend, models, settings.tiers, conversation.keyring)
        if settings.tiers.long_term_enabled
        else DisabledLongTermStore()
    )
    return MemoryDeps(
        conversation=conversation,
        keyring=conversation.keyring,
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
