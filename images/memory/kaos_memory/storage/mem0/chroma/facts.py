"""Listing a scope's facts in pages on embedded Chroma (local mode), at a cost that grows
with neither the store nor the scope.

Why Chroma cannot do it (chromadb 1.5, its SQLite metadata segment, read in its source):
``collection.get(where=..., limit=, offset=)`` evaluates a filter as ``GROUP BY`` every row
of the collection ``HAVING`` the aggregated conditions, so even one row costs a pass over
the whole store; its only order is Chroma's internal offset id (insertion order, not
``created_at``: writers race), ``offset`` is a skip and shifts under deletions, and
``$gt``/``$lt`` take numbers only; nothing sorts. Nor may KAOS query Chroma's SQLite file
itself: Chroma's Rust extension links its own copy of SQLite (3.46, static) and Python's
``sqlite3`` is another; two copies in one process do not see each other's POSIX locks
(sqlite.org, "How To Corrupt An SQLite Database File", 2.2.1), and a Python connection
writing next to Chroma's writers corrupted the file in this module's first version.

So KAOS keeps its own index, in a file only this module opens
(``<chroma dir>/kaos_fact_order.sqlite3``): per fact, its collection, id, tenant keys and
``created_at``, never its text. One composite index per filter shape KAOS sends
(``terms.mem0_filter``), each ending in ``(created_at, fact_id)``: a page is one index
seek after the cursor and ``limit`` rows, ``O(log n + limit)`` whatever the size of the
scope or the store. The payloads then come from Chroma by id (``get(ids=...)``, its
unique index), so a page serves exactly what Chroma holds. Searches use the same
indexes to name a scope's ids to Chroma (``scope_ids``) instead of its ``where``.

How it stays equal to Chroma's contents, and repairs itself when it is not:

- ``record`` after every write (``Memory.add`` returns the ids; the entry is built from
  what Chroma then holds, not from what KAOS meant to write) and ``forget`` before every
  deletion (a search names indexed ids, and Chroma refuses an id it does not hold). Mem0
  2.2.1's ``add`` only adds; KAOS deletes only through ``Memory.delete``.
- Every page checks its rows against Chroma: an id Chroma no longer has is dropped from
  the index, an entry whose keys differ from the payload is rewritten, and the page is
  read again from the same position. A stale entry can delay a page, never leak a fact
  or repeat one.
- ``reconcile`` compares the id sets of the index and of Chroma (one ``get`` of every
  id, a consistent snapshot) and adds what is missing; removal candidates are checked
  against Chroma again first, so a fact recorded meanwhile is not lost. It runs when a
  collection has no complete index yet (facts written before this module), after a
  failed write (``mark_stale``: an ``add`` that raised may have stored facts whose ids
  it never returned), at start (which also catches a crash between a write
  and its ``record``), and when the counts of the two differ (checked at most every
  ``RECHECK_SECONDS`` during paging).

A wildcard value drops its condition, as Chroma's filter does (``terms`` only puts it
on ``run_id``, which every fact carries). Deleted entries are overwritten in place
(``secure_delete``); ``vacuum_sqlite`` on ``index_file`` reclaims the file with Chroma's.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kaos_memory.storage.mem0.terms import GROUP_KEY, WILDCARD, Filters, Payload, Position

INDEX_FILE = "kaos_fact_order.sqlite3"
TABLE = "fact_order"
# The metadata keys a scope's filter can name, in the index's column order.
SCOPE_KEYS = (GROUP_KEY, "user_id", "agent_id", "run_id")
CREATED_KEY = "created_at"
RECHECK_SECONDS = 30.0
_BUSY_TIMEOUT = 30.0
_CHUNK = 500

# Filter shape (the keys with a concrete value) -> its index: the shapes
# ``terms.mem0_filter`` produces (store, user, agent, agent+principal, session,
# session+principal).
_SHAPES: dict[tuple[str, ...], str] = {
    (GROUP_KEY,): "g",
    (GROUP_KEY, "user_id"): "gu",
    (GROUP_KEY, "agent_id"): "ga",
    (GROUP_KEY, "agent_id", "user_id"): "gau",
    (GROUP_KEY, "run_id"): "gr",
    (GROUP_KEY, "run_id", "user_id"): "gru",
}
SHAPES = {frozenset(cols): f"{TABLE}_{name}" for cols, name in _SHAPES.items()}

_SCHEMA = [
    f"CREATE TABLE IF NOT EXISTS {TABLE} (collection TEXT NOT NULL, fact_id TEXT NOT NULL, "
    + ", ".join(f"{k} TEXT" for k in SCOPE_KEYS)
    + ", created_at TEXT NOT NULL, PRIMARY KEY (collection, fact_id)) WITHOUT ROWID",
    *(
        f"CREATE INDEX IF NOT EXISTS {TABLE}_{name} ON {TABLE}"
        f" (collection, {', '.join(cols)}, created_at, fact_id)"
        for cols, name in _SHAPES.items()
    ),
    # A collection's index is complete once a reconcile ran and no write failed since.
    "CREATE TABLE IF NOT EXISTS complete (collection TEXT PRIMARY KEY)",
]
_UPSERT = (
    f"INSERT OR REPLACE INTO {TABLE} (collection, fact_id, {', '.join(SCOPE_KEYS)}, created_at)"
    f" VALUES ({', '.join('?' for _ in range(len(SCOPE_KEYS) + 3))})"
)

Entry = tuple[str | None, ...]  # the scope keys' values, then created_at


# --- the index file -------------------------------------------------------------------------


def index_file(memory: Any) -> Path:
    """The index of the Mem0 store ``memory`` (beside Chroma's own file)."""
    directory = memory.vector_store.client.get_settings().persist_directory
    if not directory:
        raise ValueError("the Chroma client is not persistent")
    return Path(directory) / INDEX_FILE


_ready: set[Path] = set()
_locks: dict[Path, threading.Lock] = {}
_checked: dict[tuple[Path, str], float] = {}
_guard = threading.Lock()


def _lock(path: Path) -> threading.Lock:
    with _guard:
        return _locks.setdefault(path, threading.Lock())


@contextmanager
def _connect(memory: Any) -> Iterator[sqlite3.Connection]:
    path = index_file(memory)
    # Autocommit: each statement its own transaction unless a ``with conn`` block
    # opens one.
    conn = sqlite3.connect(path, timeout=_BUSY_TIMEOUT, isolation_level=None)
    try:
        conn.execute("PRAGMA secure_delete=ON")
        if path not in _ready:
            conn.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                conn.execute(statement)
            with _guard:
                _ready.add(path)
        yield conn
    finally:
        conn.close()


def _collection(memory: Any) -> Any:
    return memory.vector_store.collection


def _entry(payload: Payload) -> Entry:
    def text(key: str) -> str | None:
        value = payload.get(key)
        return value if isinstance(value, str) else None

    return (*(text(k) for k in SCOPE_KEYS), str(payload.get(CREATED_KEY) or ""))


def _fetch(memory: Any, ids: list[str]) -> dict[str, Payload]:
    """What Chroma holds for ``ids`` (absent ids are left out)."""
    out: dict[str, Payload] = {}
    for start in range(0, len(ids), _CHUNK):
        found = _collection(memory).get(ids=ids[start : start + _CHUNK], include=["metadatas"])
        for fact_id, meta in zip(found["ids"], found["metadatas"] or [], strict=False):
            if meta is not None:
                out[str(fact_id)] = dict(meta)
    return out


def _write(
    conn: sqlite3.Connection, name: str, rows: dict[str, Payload], gone: Iterable[str]
) -> None:
    with conn:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(_UPSERT, [(name, f, *_entry(p)) for f, p in rows.items()])
        conn.executemany(
            f"DELETE FROM {TABLE} WHERE collection = ? AND fact_id = ?", [(name, f) for f in gone]
        )


# --- what the write paths call ----------------------------------------------------------------


def record(memory: Any, ids: list[str]) -> None:
    """Index ``ids`` as Chroma now holds them (after a write); an id Chroma does not have
    is removed."""
    if not ids:
        return
    found = _fetch(memory, ids)
    with _connect(memory) as conn:
        _write(conn, _collection(memory).name, found, [f for f in ids if f not in found])


def forget(memory: Any, ids: list[str]) -> None:
    """Drop ``ids`` from the index (after a deletion)."""
    if not ids:
        return
    with _connect(memory) as conn:
        _write(conn, _collection(memory).name, {}, ids)


def mark_stale(memory: Any) -> None:
    """The index may miss facts (a write failed part-way): reconcile before the next page."""
    with _connect(memory) as conn:
        conn.execute("DELETE FROM complete WHERE collection = ?", (_collection(memory).name,))


def reconcile(memory: Any) -> tuple[int, int]:
    """Make the index hold exactly Chroma's facts; ``(added, removed)``."""
    name = _collection(memory).name
    with _lock(index_file(memory)), _connect(memory) as conn:
        conn.execute("DELETE FROM complete WHERE collection = ?", (name,))
        ours = {
            str(r[0])
            for r in conn.execute(f"SELECT fact_id FROM {TABLE} WHERE collection = ?", (name,))
        }
        theirs = {str(i) for i in _collection(memory).get(include=[])["ids"]}
        missing = sorted(theirs - ours)
        added = _fetch(memory, missing)
        # Recorded since the snapshot? Chroma has it still: keep it.
        candidates = sorted(ours - theirs)
        still = _fetch(memory, candidates)
        removed = [f for f in candidates if f not in still]
        _write(conn, name, {**added, **still}, removed)
        conn.execute("INSERT OR IGNORE INTO complete (collection) VALUES (?)", (name,))
        with _guard:
            _checked[(index_file(memory), name)] = time.monotonic()
        return len(added), len(removed)


def _maybe_reconcile(memory: Any, conn: sqlite3.Connection, name: str) -> None:
    complete = conn.execute("SELECT 1 FROM complete WHERE collection = ?", (name,)).fetchone()
    if complete is None:
        reconcile(memory)
        return
    key = (index_file(memory), name)
    with _guard:
        due = time.monotonic() - _checked.get(key, 0.0) >= RECHECK_SECONDS
        if due:
            _checked[key] = time.monotonic()
    if due:
        ours = conn.execute(f"SELECT count(*) FROM {TABLE} WHERE collection = ?", (name,))
        if int(ours.fetchone()[0]) != int(_collection(memory).count()):
            reconcile(memory)


# --- paging ---------------------------------------------------------------------------------


def _where(collection: str, filters: Filters) -> tuple[str, list[str], list[Any]]:
    """The index hint, conditions and parameters selecting ``filters``' rows."""
    unknown = sorted(set(filters) - set(SCOPE_KEYS))
    if unknown:
        raise ValueError(f"cannot select on filter keys {unknown}")
    concrete = {k: v for k, v in filters.items() if v != WILDCARD}
    index = SHAPES.get(frozenset(concrete))
    hint = f" INDEXED BY {index}" if index is not None else ""
    conditions = ["collection = ?"]
    params: list[Any] = [collection]
    for key in SCOPE_KEYS:
        if key in concrete:
            conditions.append(f"{key} = ?")
            params.append(concrete[key])
    return hint, conditions, params


def page_query(
    collection: str, filters: Filters, limit: int, after: Position | None
) -> tuple[str, list[Any]]:
    """The statement and parameters of one page of index rows (also what tests explain)."""
    hint, conditions, params = _where(collection, filters)
    if after is not None:
        conditions.append("(created_at, fact_id) > (?, ?)")
        params += [after[0], after[1]]
    columns = ", ".join(SCOPE_KEYS)
    query = (
        f"SELECT fact_id, {columns}, created_at FROM {TABLE}{hint}"
        f" WHERE {' AND '.join(conditions)} ORDER BY created_at, fact_id LIMIT ?"
    )
    return query, [*params, limit]


def ids_query(collection: str, filters: Filters) -> tuple[str, list[Any]]:
    """The statement and parameters of every fact id inside ``filters`` (an index-only
    scan of the filter shape's index)."""
    hint, conditions, params = _where(collection, filters)
    return f"SELECT fact_id FROM {TABLE}{hint} WHERE {' AND '.join(conditions)}", params


def scope_ids(memory: Any, scope_filters: Filters) -> list[str] | None:
    """The ids of the facts inside ``scope_filters``, for a search that names them
    (``collection.query(ids=...)``) instead of filtering in Chroma; None while the index
    is not known complete (the caller filters in Chroma then).

    A ``where`` costs what the whole collection holds: Chroma evaluates each condition
    over every row it matches, in the whole collection, so a condition on a key that many
    facts share (``agent_id``) costs more than the search itself. Named ids cost what the
    tenant holds (the figures: docs/benchmarks.md, "Measured figures behind the design").
    """
    with _connect(memory) as conn:
        return _scope_ids(conn, _collection(memory).name, scope_filters)


def _scope_ids(conn: sqlite3.Connection, name: str, scope_filters: Filters) -> list[str] | None:
    if conn.execute("SELECT 1 FROM complete WHERE collection = ?", (name,)).fetchone() is None:
        return None
    query, params = ids_query(name, scope_filters)
    return [str(r[0]) for r in conn.execute(query, params)]


class IndexReader:
    """``scope_ids`` for a recall, on connections kept open between searches.

    Opening a connection to the index, and its first statement (which reads the schema),
    cost several times the read itself, and a recall of a scope ran both on every
    search. A recall lane takes an idle connection (or opens one) and gives it back. They
    only read, each statement its own transaction (autocommit), so between searches they
    hold no lock and no snapshot: every read sees the latest commit, and the index's
    writers, its reconcile and its ``VACUUM`` work as with none open. Built after the
    schema exists (``ChromaBackend.build`` reconciles first).
    """

    def __init__(self, memory: Any) -> None:
        self._path = index_file(memory)
        self._name = _collection(memory).name
        self._idle: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        self._closed = False

    def scope_ids(self, scope_filters: Filters) -> list[str] | None:
        """``scope_ids`` of the reader's store (blocking)."""
        with self._guard:
            if self._closed:
                raise RuntimeError("the listing index reader is closed")
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            # Handed between the recall lanes, one user at a time (the idle list).
            conn = sqlite3.connect(
                self._path, timeout=_BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
            )
        try:
            ids = _scope_ids(conn, self._name, scope_filters)
        except BaseException:
            conn.close()  # not kept: whatever failed may have left it unusable
            raise
        with self._guard:
            if not self._closed:
                self._idle.append(conn)
                return ids
        conn.close()  # the reader closed meanwhile
        return ids

    def close(self) -> None:
        """Close the idle connections; one in use is closed when it comes back."""
        with self._guard:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def page(
    memory: Any, scope_filters: Filters, limit: int, after: Position | None
) -> list[tuple[str, Payload]]:
    """Up to ``limit`` facts inside ``scope_filters`` in ``(created_at, id)`` order, strictly
    after ``after``: ``(fact id, payload)``, the payload as Chroma holds it."""
    if limit <= 0:
        return []
    name = _collection(memory).name
    with _connect(memory) as conn:
        _maybe_reconcile(memory, conn, name)
        out: list[tuple[str, Payload]] = []
        position = after
        while len(out) < limit:
            want = limit - len(out)
            query, params = page_query(name, scope_filters, want, position)
            rows = conn.execute(query, params).fetchall()
            if not rows:
                break
            ids = [str(r[0]) for r in rows]
            indexed = {str(r[0]): tuple(r[1:]) for r in rows}
            found = _fetch(memory, ids)
            stale = {f: p for f, p in found.items() if _entry(p) != indexed[f]}
            gone = [f for f in ids if f not in found]
            if stale or gone:
                # Repair, then read the same range again: a rewritten entry may move.
                _write(conn, name, stale, gone)
                continue
            out += [(f, found[f]) for f in ids]
            if len(rows) < want:
                break
            position = (str(rows[-1][-1]), ids[-1])
        return out


__all__ = [
    "SHAPES",
    "TABLE",
    "IndexReader",
    "forget",
    "ids_query",
    "index_file",
    "mark_stale",
    "page",
    "page_query",
    "reconcile",
    "record",
    "scope_ids",
]
