"""What the erasure tests look at: every table, every byte of the data dir, every model call.

Nothing here trusts the service's account of an erasure. ``table_text`` dumps every row of
every table the service's databases hold (KAOS's and Mem0's: all SQLite files of the data
dir in local mode, every table of the database in external mode), ``raw_hits`` reads the
bytes of every file under the data dir (freed pages, write-ahead logs, Chroma's segment
files), and ``model_texts_since`` is every chat message and embedding input the
development model received from a point in time on.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from psycopg import sql

from tests.support.devmodel import DevModel
from tests.support.memory import MemoryDb
from tests.support.postgres import pg_query


def _sqlite_dump(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        names = [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if not str(r[0]).startswith("sqlite_")
        ]
        parts = []
        for name in names:
            quoted = '"' + name.replace('"', '""') + '"'
            try:
                rows = conn.execute(f"SELECT * FROM {quoted}").fetchall()
            except sqlite3.Error:
                continue  # a virtual table whose module this sqlite build lacks
            parts += [f"{name}: {row!r}" for row in rows]
        return "\n".join(parts)
    finally:
        conn.close()


def is_sqlite(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(16) == b"SQLite format 3\x00"


def table_text(db: MemoryDb) -> str:
    """Every row of every table of the store, as text (and, when the service seals its
    texts, every text it can still open)."""
    if db.kek_dir is not None:
        opened = [db.everything_text(), json.dumps(db.vector_payloads(), default=str)]
        return "\n".join([_stored_text(db), *opened])
    return _stored_text(db)


def _stored_text(db: MemoryDb) -> str:
    if db.backend == "local":
        files = [p for p in db.data_dir.rglob("*") if p.is_file() and is_sqlite(p)]
        assert files, "no database files in the data dir"
        return "\n".join(_sqlite_dump(p) for p in files)
    assert db.dsn is not None
    tables = pg_query(
        db.dsn,
        "SELECT table_name FROM information_schema.tables"
        " WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    assert tables, "no tables in the database"
    parts = []
    for (name,) in tables:
        query = sql.SQL("SELECT t::text FROM {} t").format(sql.Identifier(name)).as_string(None)
        parts += [f"{name}: {r[0]}" for r in pg_query(db.dsn, query)]
    return "\n".join(parts)


def raw_hits(data_dir: Path, markers: list[str]) -> dict[str, list[str]]:
    """The files under ``data_dir`` whose bytes contain a marker, with the markers found."""
    hits: dict[str, list[str]] = {}
    for path in sorted(data_dir.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        found = [m for m in markers if m.encode() in data]
        if found:
            hits[str(path.relative_to(data_dir))] = found
    return hits


def model_texts_since(devmodel: DevModel, since: float) -> list[str]:
    """Every chat message and embedding input the model received at or after ``since``."""
    texts: list[str] = []
    for req in devmodel.requests():
        if req["received_at"] >= since:
            texts += [str(m["content"]) for m in req["messages"]]
    for req in devmodel.embedding_requests():
        if req["received_at"] >= since:
            texts += [str(t) for t in req["input"]]
    return texts


def leaks(texts: list[str], markers: list[str]) -> list[str]:
    return [t[:160] for t in texts if any(m in t for m in markers)]


def extraction_in_flight(db: MemoryDb) -> list[dict[str, Any]]:
    """Folds whose extraction was begun (an attempt counted) and has not finished."""
    return [
        f
        for f in db.folds()
        if f["extraction_status"] == "pending" and f["extraction_attempts"] >= 1
    ]
