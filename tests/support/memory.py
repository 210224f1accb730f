"""Direct readers of a memory service's databases, for assertions that must not trust the API.

Erasure tests read every place the service or Mem0 keeps text: the conversational tables
(SQLite file or PostgreSQL), the vector store (Chroma's SQLite, including its write-ahead
log, or the pgvector table) and Mem0's history database (``history`` and ``messages``).
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kaos_memory.settings import MemorySettings
from psycopg import sql

from tests.support.postgres import pg_query
from tests.support.sealed_text import Opener


@dataclass(frozen=True)
class MemoryDb:
    backend: str  # "local" | "external"
    data_dir: Path
    dsn: str | None
    collection: str
    # Set: the service seals its texts under this KEK (``sealed_text``); readers open them.
    kek_dir: Path | None = None

    def _opener(self) -> Opener | None:
        if self.kek_dir is None:
            return None
        return Opener(self.kek_dir, lambda query: self.relational(query))

    # --- conversational tiers -----------------------------------------------------------

    def relational(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of one query over the conversational tables (``%s`` placeholders)."""
        if self.backend == "local":
            path = self.data_dir / "conversation.sqlite3"
            if not path.exists():
                return []
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            try:
                return list(conn.execute(query.replace("%s", "?"), params).fetchall())
            finally:
                conn.close()
        assert self.dsn is not None
        return pg_query(self.dsn, query, params or None)

    def turns(self) -> list[dict[str, Any]]:
        rows = self.relational(
            "SELECT seq, key, role, content, principal, agent, folded_by FROM kaos_mem_turns"
            " ORDER BY seq"
        )
        cols = ("seq", "key", "role", "content", "principal", "agent", "folded_by")
        out = [dict(zip(cols, r, strict=True)) for r in rows]
        opener = self._opener()
        if opener is not None:
            rids = dict(self.relational("SELECT seq, rid FROM kaos_mem_turns"))
            for t in out:
                record = f"turn:{t['key']}/{rids.get(t['seq'])}"
                t["content"] = opener.open(t["content"], record)
        return out

    def digests(self) -> list[dict[str, Any]]:
        rows = self.relational(
            "SELECT key, version, summary FROM kaos_mem_digests ORDER BY key, version"
        )
        out = [dict(zip(("key", "version", "summary"), r, strict=True)) for r in rows]
        opener = self._opener()
        if opener is not None:
            for d in out:
                d["summary"] = opener.open(d["summary"], f"digest:{d['key']}/{d['version']}")
        return out

    def folds(self) -> list[dict[str, Any]]:
        rows = self.relational(
            "SELECT id, key, first_seq, last_seq, turns, digest_version, digest_status,"
            " extraction_status, extraction_attempts FROM kaos_mem_folds ORDER BY id"
        )
        cols = (
            "id",
            "key",
            "first_seq",
            "last_seq",
            "turns",
            "digest_version",
            "digest_status",
            "extraction_status",
            "extraction_attempts",
        )
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def leases(self) -> list[dict[str, Any]]:
        rows = self.relational("SELECT key, kind, owner, expires FROM kaos_mem_leases")
        return [dict(zip(("key", "kind", "owner", "expires"), r, strict=True)) for r in rows]

    def outbox_depth(self) -> int:
        rows = self.relational(
            "SELECT COUNT(*) FROM kaos_mem_folds"
            " WHERE digest_status = 'pending' OR extraction_status = 'pending'"
        )
        return int(rows[0][0]) if rows else 0

    def sessions(self) -> list[dict[str, Any]]:
        rows = self.relational("SELECT key, session, last_at, flushed FROM kaos_mem_sessions")
        cols = ("key", "session", "last_at", "flushed")
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def attribution(self) -> list[dict[str, Any]]:
        rows = self.relational(
            "SELECT key, grp, session, principal, agent FROM kaos_mem_attribution"
        )
        cols = ("key", "grp", "session", "principal", "agent")
        return [dict(zip(cols, r, strict=True)) for r in rows]

    # --- long-term ----------------------------------------------------------------------

    def vector_payloads(self) -> list[dict[str, Any]]:
        """Every fact row of the vector store, as ``{"id", **payload}`` (its text opened
        when the service seals it)."""
        rows = self._vector_payloads()
        opener = self._opener()
        if opener is not None:
            for row in rows:
                row["data"] = opener.open(row.get("data"), f"fact:{row['id']}")
        return rows

    def _vector_payloads(self) -> list[dict[str, Any]]:
        if self.backend == "local":
            path = self.data_dir / "chroma" / "chroma.sqlite3"
            if not path.exists():
                return []
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            try:
                rows = conn.execute(
                    "SELECT e.embedding_id, m.key, m.string_value FROM embeddings e"
                    " JOIN embedding_metadata m ON m.id = e.id"
                ).fetchall()
            finally:
                conn.close()
            out: dict[str, dict[str, Any]] = {}
            for eid, key, value in rows:
                out.setdefault(eid, {"id": eid})[key] = value
            return list(out.values())
        assert self.dsn is not None
        exists = pg_query(self.dsn, "SELECT to_regclass(%s)", (self.collection,))
        if not exists or exists[0][0] is None:
            return []
        rows = pg_query(
            self.dsn,
            sql.SQL("SELECT id::text, payload FROM {}")
            .format(sql.Identifier(self.collection))
            .as_string(None),
        )
        return [{"id": r[0], **r[1]} for r in rows]

    def vector_store_text(self) -> str:
        """Every byte of text the vector store keeps, including Chroma's write-ahead log."""
        if self.backend == "local":
            path = self.data_dir / "chroma" / "chroma.sqlite3"
            if not path.exists():
                return ""
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
            try:
                parts = [str(r) for r in conn.execute("SELECT metadata FROM embeddings_queue")]
                parts += [str(r) for r in conn.execute("SELECT * FROM embedding_metadata")]
            finally:
                conn.close()
            return "\n".join(parts)
        return "\n".join(json.dumps(p) for p in self.vector_payloads())

    # --- Mem0 history -------------------------------------------------------------------

    def mem0_history(self) -> list[dict[str, Any]]:
        return self._history("SELECT memory_id, old_memory, new_memory, event FROM history")

    def mem0_messages(self) -> list[dict[str, Any]]:
        rows = self._history("SELECT session_scope, role, content FROM messages")
        opener = self._opener()
        if opener is not None:
            for m in rows:
                m["content"] = opener.open(m["content"], f"message:{m['session_scope']}")
        return rows

    def _history(self, query: str) -> list[dict[str, Any]]:
        path = self.data_dir / "mem0" / "history.db"
        if not path.exists():
            return []
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in conn.execute(query).fetchall()]
        finally:
            conn.close()

    def everything_text(self) -> str:
        """All text any tier or Mem0 keeps, for "nothing of X is left anywhere" checks."""
        parts = [json.dumps(self.turns()), json.dumps(self.digests())]
        parts += [json.dumps(self.attribution()), self.vector_store_text()]
        parts += [json.dumps(self.mem0_history()), json.dumps(self.mem0_messages())]
        return "\n".join(parts)


def consolidation_stores(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    data_dir: Path,
    model_base_url: str,
    collection: str,
    **settings: Any,
) -> tuple[MemorySettings, MemoryDb]:
    """Settings for a memory service's consolidation parts run in the test process, on
    real stores (``request.param``: "local", or "external" on the ``pg_dsn`` fixture's
    PostgreSQL) with Mem0 and the development model at ``model_base_url``, and the reader
    of those stores. ``settings`` adds to or overrides the settings."""
    # Mem0 reads both at import and the adapter sets them; restored after the test.
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    monkeypatch.setenv("MEM0_DIR", str(data_dir / "mem0"))
    dsn = request.getfixturevalue("pg_dsn") if request.param == "external" else None
    memory_settings = MemorySettings(
        storage=request.param,
        data_dir=data_dir,
        dsn=dsn,
        collection=collection,
        model_base_url=model_base_url,
        summarization_model="dev-summarizer",
        embedding_model="dev-embedder",
        embedding_dims=64,
        **settings,
    )
    db = MemoryDb(
        backend=request.param,
        data_dir=memory_settings.backend.data_dir,
        dsn=dsn,
        collection=collection,
    )
    return memory_settings, db
