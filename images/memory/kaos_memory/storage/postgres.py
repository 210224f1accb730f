"""PostgreSQL dialect of the conversational tiers (external mode), on the pgvector database.

A ``psycopg_pool.ConnectionPool`` used from the store's small thread pool. Fold and digest
work on one key takes a transaction-scoped advisory lock on the key's hash, so several
replicas on one database serialise their folds of a session instead of double-folding.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg_pool import ConnectionPool

from kaos_memory.storage.relational import Cursor

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS kaos_mem_turns (
        seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        key TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        at TEXT NOT NULL,
        principal TEXT,
        agent TEXT,
        infer BOOLEAN NOT NULL,
        folded_by BIGINT
    )""",
    "CREATE INDEX IF NOT EXISTS kaos_mem_turns_window ON kaos_mem_turns (key, folded_by, seq)",
    "CREATE INDEX IF NOT EXISTS kaos_mem_turns_fold ON kaos_mem_turns (folded_by)",
    """CREATE TABLE IF NOT EXISTS kaos_mem_digests (
        key TEXT NOT NULL,
        version INTEGER NOT NULL,
        summary TEXT NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (key, version)
    )""",
    """CREATE TABLE IF NOT EXISTS kaos_mem_folds (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        key TEXT NOT NULL,
        session TEXT NOT NULL,
        first_seq BIGINT NOT NULL,
        last_seq BIGINT NOT NULL,
        turns INTEGER NOT NULL,
        tokens INTEGER NOT NULL,
        digest_version INTEGER,
        digest_status TEXT NOT NULL,
        extraction_status TEXT NOT NULL,
        created_at TEXT NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS kaos_mem_folds_key ON kaos_mem_folds (key, digest_status)",
    """CREATE TABLE IF NOT EXISTS kaos_mem_attribution (
        key TEXT NOT NULL,
        grp TEXT NOT NULL,
        session TEXT NOT NULL,
        principal TEXT NOT NULL,
        agent TEXT NOT NULL,
        PRIMARY KEY (key, principal, agent)
    )""",
    "CREATE INDEX IF NOT EXISTS kaos_mem_attr_principal ON kaos_mem_attribution (grp, principal)",
    "CREATE INDEX IF NOT EXISTS kaos_mem_attr_agent ON kaos_mem_attribution (grp, agent)",
]

# Serialises concurrent schema creation by several replicas starting at once.
_SCHEMA_LOCK = 0x6B616F73  # "kaos"


class PostgresDialect:
    def __init__(self, dsn: str, *, pool_size: int) -> None:
        self.dsn = dsn
        self.threads = pool_size
        self._pool: ConnectionPool[Any] | None = None

    def open(self) -> None:
        pool: ConnectionPool[Any] = ConnectionPool(
            self.dsn, min_size=1, max_size=self.threads, open=False, timeout=10.0
        )
        pool.open(wait=True, timeout=30.0)
        self._pool = pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def schema(self) -> list[str]:
        return [f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK})", *SCHEMA]

    def q(self, text: str) -> str:
        return text

    @contextmanager
    def transaction(self) -> Iterator[Cursor]:
        if self._pool is None:
            raise RuntimeError("postgres store is not open")
        with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur

    def lock_key(self, cur: Cursor, key: str) -> None:
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (key,))
