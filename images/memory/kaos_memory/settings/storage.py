"""Where the tiers live: the storage mode, its volume or database, and the vector store."""

from __future__ import annotations

import re
from pathlib import Path
from typing import ClassVar, Literal

from kaos_core.settings import SettingsGroup, setting
from pydantic import field_validator

DEFAULT_COLLECTION = "kaos_memory"
# Chroma's collection rule (3-63 chars, alphanumerics plus ._-, alphanumeric at both ends)
# is the stricter of the two backends; pgvector uses the name as a table name.
_COLLECTION_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_]{1,61}[a-zA-Z0-9]$")


class StorageSettings(SettingsGroup):
    """Where the tiers live; ``group`` is the store group every key and fact carries."""

    title: ClassVar[str] = "Storage"

    mode: Literal["local", "external"] = setting(
        "`local`: SQLite + embedded Chroma in the data dir (one replica); `external`:"
        " PostgreSQL + pgvector (stateless, several replicas)",
        env="STORAGE",
        default="local",
    )
    data_dir: Path = setting(
        "local mode: the one volume with `conversation.sqlite3`, `chroma/`, `mem0/` (Mem0's"
        " history DB) and the single-writer lock `kaos-memory.lock`. Both modes: Mem0's config"
        " dir (`MEM0_DIR`) is `mem0/` here, so it must be writable (an `emptyDir` is enough in"
        " external mode, which keeps no Mem0 history)",
        default=Path("/data/memory"),
    )
    dsn: str | None = setting(
        "external mode (required there): PostgreSQL connection string; the conversational"
        " tables (`kaos_mem_*`) and Mem0's pgvector table share this database. HNSW iterative"
        " scans are switched on for it unless the DSN sets `options` itself",
        default=None,
    )
    collection: str = setting(
        "vector collection (Chroma collection / pgvector table) and the store group recorded"
        " on every fact and conversation key. Also accepted as `KAOS_MEMORY_LOCAL_COLLECTION`"
        " (local mode) or `KAOS_MEMORY_EXTERNAL_COLLECTION` (external mode) when"
        " `KAOS_MEMORY_COLLECTION` is unset. 3-63 letters, digits or `_`",
        default=DEFAULT_COLLECTION,
    )
    mem0_threads: int = setting(
        "threads running Mem0's blocking calls (the event loop never runs them); local mode"
        " gives recall's Chroma searches as many threads of their own, so extractions"
        " waiting on a slow model never queue a recall",
        default=4,
        ge=1,
        le=64,
    )
    pg_pool_size: int = setting(
        "external mode: connections (and threads) of the conversational store, and the"
        " connections of recall's vector searches and of its session reads (a pool each, on"
        " the event loop)",
        default=8,
        ge=1,
        le=256,
    )
    vector_cache_mb: int = setting(
        "memory (MiB) for principals' facts searched in the service instead of the vector"
        " store, exactly. Local mode: every principal's vectors and payloads, current with"
        " every write this process makes. External mode: the vectors of principals with at"
        " least 1,000 facts, checked against the database's version of the principal on"
        " every search. A principal is held only if it fits once those not searched for 5"
        " minutes are dropped, else the store serves it; 0 holds none. Read from"
        " KAOS_MEMORY_PG_VECTOR_CACHE_MB, its earlier name, when unset",
        default=256,
        ge=0,
        le=65536,
    )
    pg_partitions: int = setting(
        "external mode: hash partitions by principal of a new long-term table (a principal's"
        " search, listing and erasure read one partition); 0 keeps Mem0's single table. Read"
        " only when the table is created: an existing table keeps its layout",
        default=64,
        ge=0,
        le=1024,
    )

    @field_validator("collection")
    @classmethod
    def _collection_name(cls, value: str) -> str:
        if not _COLLECTION_RE.match(value):
            raise ValueError(
                "3-63 letters, digits or '_', starting and ending with a letter or digit"
            )
        return value

    def problems(self, prefix: str) -> list[str]:
        if self.mode == "external" and not self.dsn:
            return [
                f"{self.env_name('mode', prefix)}=external needs {self.env_name('dsn', prefix)}"
            ]
        return []

    @property
    def group(self) -> str:
        """The store group: the collection name, stable within one store."""
        return self.collection

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "conversation.sqlite3"

    @property
    def chroma_dir(self) -> Path:
        return self.data_dir / "chroma"

    @property
    def mem0_dir(self) -> Path:
        return self.data_dir / "mem0"

    @property
    def mem0_history_path(self) -> Path:
        # Local mode only: external mode keeps no node-local history (storage.mem0.history).
        return self.mem0_dir / "history.db"
