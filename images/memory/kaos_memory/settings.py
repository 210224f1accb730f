"""Settings of the memory service, read once from ``KAOS_MEMORY_*`` variables at start.

Every knob of the tiers, the posture, the background executor and the model bindings
lives here and is validated before anything starts: contradictory values (a fold target
above its trigger, external storage without a DSN) stop the process with one line naming
the variables. ``images/memory/SETTINGS.md`` documents each one for operators.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar, Literal

from kaos_core.memory.contract import FailureMode
from kaos_core.settings import EnvSettings, SettingsError
from pydantic import Field, model_validator

ReadCeiling = Literal["session", "agent", "user"]

DEFAULT_COLLECTION = "kaos_memory"
# Chroma's collection rule (3-63 chars, alphanumerics plus ._-, alphanumeric at both ends)
# is the stricter of the two backends; pgvector uses the name as a table name.
_COLLECTION_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_]{1,61}[a-zA-Z0-9]$")
# The seed names the collection variable per storage mode; both are accepted.
_MODE_COLLECTION_ENV = {
    "local": "KAOS_MEMORY_LOCAL_COLLECTION",
    "external": "KAOS_MEMORY_EXTERNAL_COLLECTION",
}


class MemorySettings(EnvSettings):
    """The memory service's settings; one field per ``KAOS_MEMORY_<FIELD>`` variable."""

    env_prefix: ClassVar[str] = "KAOS_MEMORY_"

    host: str = "0.0.0.0"
    port: int = Field(default=8080, ge=1, le=65535)
    log_level: str = "INFO"

    storage: Literal["local", "external"] = "local"
    data_dir: Path = Path("/data/memory")
    dsn: str | None = None
    collection: str = DEFAULT_COLLECTION

    model_base_url: str = "http://127.0.0.1:8000/v1"
    api_key: str | None = None
    summarization_model: str = "summarizer"
    embedding_model: str = "embedder"
    embedding_dims: int = Field(default=1536, ge=1, le=16000)
    model_timeout: float = Field(default=60.0, gt=0)
    embed_timeout: float = Field(default=10.0, gt=0)

    token_budget: int = Field(default=4096, ge=16)
    max_events: int = Field(default=2000, ge=2)
    fold_trigger: int | None = Field(default=None, ge=1)
    fold_target: int | None = Field(default=None, ge=1)
    digest_retention: int = Field(default=20, ge=1)

    max_read_scope: ReadCeiling = "agent"
    require_principal: bool = False
    require_agent_identity: bool = False
    default_failure_mode: FailureMode = "soft"
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    recall_top_k: int = Field(default=10, ge=1, le=100)
    recall_timeout: float = Field(default=5.0, gt=0)
    recall_threshold: float = Field(default=0.1, ge=0, le=1)

    executor_workers: int = Field(default=2, ge=1, le=64)
    executor_queue_size: int = Field(default=256, ge=1)
    executor_retries: int = Field(default=3, ge=0, le=20)
    executor_backoff: float = Field(default=0.5, ge=0)
    executor_backoff_max: float = Field(default=10.0, ge=0)
    drain_timeout: float = Field(default=25.0, ge=0)
    lease_ttl: float = Field(default=60.0, ge=1.0)
    sweep_interval: float = Field(default=10.0, gt=0)
    idle_flush_seconds: float = Field(default=900.0, ge=0)
    extraction_max_attempts: int = Field(default=200, ge=1, le=100_000)
    mem0_threads: int = Field(default=4, ge=1, le=64)
    pg_pool_size: int = Field(default=8, ge=1, le=256)

    @model_validator(mode="after")
    def _check(self) -> MemorySettings:
        problems: list[str] = []
        if self.storage == "external" and not self.dsn:
            problems.append("KAOS_MEMORY_STORAGE=external needs KAOS_MEMORY_DSN")
        if not _COLLECTION_RE.match(self.collection):
            problems.append(
                f"KAOS_MEMORY_COLLECTION={self.collection!r}: 3-63 letters, digits or '_', "
                "starting and ending with a letter or digit"
            )
        trigger, target = self.effective_fold_trigger, self.effective_fold_target
        if not 0 < target < trigger <= self.token_budget:
            problems.append(
                "need 0 < KAOS_MEMORY_FOLD_TARGET < KAOS_MEMORY_FOLD_TRIGGER <= "
                f"KAOS_MEMORY_TOKEN_BUDGET, got target={target}, trigger={trigger}, "
                f"budget={self.token_budget}"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def effective_fold_trigger(self) -> int:
        return self.token_budget if self.fold_trigger is None else self.fold_trigger

    @property
    def effective_fold_target(self) -> int:
        return self.token_budget // 2 if self.fold_target is None else self.fold_target

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
        # Local mode only: external mode keeps no node-local history (storage.history).
        return self.mem0_dir / "history.db"


def load_memory_settings(environ: Mapping[str, str] | None = None) -> MemorySettings:
    """Settings from the environment, honouring the seed's per-mode collection variables."""
    env = dict(os.environ if environ is None else environ)
    if not env.get("KAOS_MEMORY_COLLECTION"):
        storage = env.get("KAOS_MEMORY_STORAGE") or "local"
        alias = _MODE_COLLECTION_ENV.get(storage)
        if alias and env.get(alias):
            env["KAOS_MEMORY_COLLECTION"] = env[alias]
    return MemorySettings.from_env(env)


__all__ = ["MemorySettings", "SettingsError", "load_memory_settings"]
