"""A principal's facts held in the service (local mode): recall without a Chroma query.

Asking Chroma anything (a ``collection.query``, even a ``get`` of a few ids) has a fixed
CPU cost whatever the answer holds: most of it is spent handing the query between Python,
Chroma's tokio runtime and its SQLite worker thread (futex wake-ups), and that fixed cost
dominated a recall's CPU in local mode. Held in memory, a principal's facts are
searched without it: the squared Euclidean distances of Chroma's default space (``l2``; a
collection in another space is not held), nearest first, scored as Mem0 scores Chroma's
hits (``1 / (1 + distance)``), among the rows of the scope's agent and session when it
names them. The figures: docs/benchmarks.md, "Measured figures behind the design".

What keeps it exact: in local mode this process is Chroma's only writer (embedded, one
replica), and every change goes through the Chroma backend (``backend``), which brackets
it with ``changing``:

- a write of a principal's facts (Mem0's ``add``, whose inference updates and deletes
  only facts under the same principal's id) drops that principal, before and after;
- a deletion by id (an erasure, a fold's retry) drops every principal, before and after.

A load reads the principal's ids from the listing index (``facts.scope_ids``) and
their vectors and payloads from Chroma, and is kept only if no change of that principal
began or ended while it read and none is in flight. So what is held is what Chroma holds,
and an erased fact is out of memory before its erasure returns. A principal whose index
is not known complete is not held (the search asks Chroma, as before).

Which principals stay is the per-principal vector cache's budget (``mem0.cache``),
shared with external mode.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kaos_memory.storage.mem0 import cache
from kaos_memory.storage.mem0.cache import PrincipalVectorCache
from kaos_memory.storage.mem0.chroma import facts
from kaos_memory.storage.mem0.terms import (
    AGENT_KEY,
    GROUP_KEY,
    RUN_ID_KEY,
    USER_KEY,
    WILDCARD,
    Filters,
    Hit,
    Key,
    Payload,
)

log = logging.getLogger(__name__)

# The scope keys a held principal's rows are narrowed by (besides group and principal).
ROW_KEYS = (AGENT_KEY, RUN_ID_KEY)
_CHUNK = 500

# What a load reads: the facts' ids, payloads and vectors (one row each), or None when the
# principal's ids are not known (the listing index is not complete).
Loaded = tuple[list[str], list[Payload], Any]


@dataclass(frozen=True)
class CachedFacts:
    """A principal's facts; empty with ``refused`` set when it did not fit."""

    ids: tuple[str, ...] = ()
    payloads: tuple[Payload, ...] = ()
    vectors: Any = None  # numpy float32 (facts, dims)
    squares: Any = None  # numpy float32 (facts,): each row's squared length
    # ROW_KEYS key -> value -> the rows carrying it (numpy int64, ascending)
    rows_by: dict[str, dict[str, Any]] = field(default_factory=dict)
    size: int = 0  # bytes, against the budget
    refused: float | None = None

    def serves(self, dims: int) -> bool:
        return self.refused is None and (self.vectors is None or self.vectors.shape[1] == dims)

    def rows(self, filters: Filters) -> Any:
        """The rows inside ``filters``' agent and session (None: every row)."""
        chosen = None
        for key in ROW_KEYS:
            value = filters.get(key)
            if value is None or value == WILDCARD:
                continue
            found = self.rows_by.get(key, {}).get(value)
            if found is None:
                return np.empty(0, dtype=np.int64)
            chosen = found if chosen is None else np.intersect1d(chosen, found, assume_unique=True)
        return chosen


def principal_key(filters: Filters) -> Key | None:
    """The ``(group, principal)`` whose held facts can answer ``filters``: the group and
    the principal named (neither a wildcard), any other key among ``ROW_KEYS``."""
    group, principal = filters.get(GROUP_KEY), filters.get(USER_KEY)
    if group is None or principal is None or WILDCARD in (group, principal):
        return None
    if not set(filters) <= {GROUP_KEY, USER_KEY, *ROW_KEYS}:
        return None
    return group, principal


def supported(memory: Any) -> bool:
    """Whether the collection's distances are the squared Euclidean ones computed here."""
    try:
        config = memory.vector_store.collection.configuration_json or {}
        return bool((config.get("hnsw") or {}).get("space", "l2") == "l2")
    except Exception:
        log.warning("reading the Chroma collection's configuration failed", exc_info=True)
        return False


def read(memory: Any, key: Key) -> Loaded | None:
    """The principal's facts as Chroma holds them (in a worker thread)."""
    group, principal = key
    ids = facts.scope_ids(memory, {GROUP_KEY: group, USER_KEY: principal})
    if ids is None:
        return None
    found_ids: list[str] = []
    payloads: list[Payload] = []
    vectors: list[Any] = []
    collection = memory.vector_store.collection
    for start in range(0, len(ids), _CHUNK):
        got = collection.get(ids=ids[start : start + _CHUNK], include=["embeddings", "metadatas"])
        for fact_id, meta, vector in zip(
            got["ids"], got["metadatas"] or [], got["embeddings"], strict=True
        ):
            if meta is not None:
                found_ids.append(str(fact_id))
                payloads.append(meta)
                vectors.append(vector)
    return found_ids, payloads, vectors


def _held(loaded: Loaded) -> CachedFacts:
    ids, payloads, rows = loaded
    if not ids:
        return CachedFacts()
    vectors = np.asarray(rows, dtype=np.float32)
    squares = np.einsum("ij,ij->i", vectors, vectors)
    rows_by: dict[str, dict[str, Any]] = {}
    for key in ROW_KEYS:
        by: dict[str, list[int]] = {}
        for row, payload in enumerate(payloads):
            value = payload.get(key)
            if isinstance(value, str):
                by.setdefault(value, []).append(row)
        rows_by[key] = {v: np.asarray(r, dtype=np.int64) for v, r in by.items()}
    size = int(vectors.nbytes + squares.nbytes) + sum(
        _bytes(i) + _bytes(p) + 16 for i, p in zip(ids, payloads, strict=True)
    )
    return CachedFacts(tuple(ids), tuple(payloads), vectors, squares, rows_by, size)


def _bytes(value: Any) -> int:
    """A payload's (or id's) memory, roughly: the dict and its keys and values."""
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(_bytes(k) + _bytes(v) for k, v in value.items())
    return sys.getsizeof(value)


def _nearest(held: CachedFacts, rows: Any, vector: list[float], limit: int) -> list[Hit]:
    query = np.asarray(vector, dtype=np.float32)
    if rows is None:
        vectors, squares = held.vectors, held.squares
    else:
        vectors, squares = held.vectors[rows], held.squares[rows]
    distances = np.maximum(squares + float(query @ query) - 2.0 * (vectors @ query), 0.0)
    # The ``limit`` smallest in any order, then only those sorted.
    if limit < len(distances):
        chosen = np.argpartition(distances, limit)[:limit]
    else:
        chosen = np.arange(len(distances))
    chosen = chosen[np.argsort(distances[chosen], kind="stable")]
    out: list[Hit] = []
    for i in chosen:
        row = int(i) if rows is None else int(rows[i])
        out.append((held.ids[row], 1.0 / (1.0 + float(distances[i])), held.payloads[row]))
    return out


class ChromaPrincipalCache(PrincipalVectorCache[CachedFacts]):
    """The held principals of one Chroma collection. ``read`` loads one (``read`` above,
    bound to the store's ``Memory``), in a worker thread."""

    def __init__(self, max_bytes: int, reader: Callable[[Key], Loaded | None]) -> None:
        super().__init__(max_bytes)
        self._reader = reader
        self._writes: dict[Key | None, int] = {}  # changes in flight (None: every principal)
        self._reading: dict[Key, bool] = {}  # the load under way: whether a change met it

    def holds(self, key: Key) -> bool:
        """Whether ``key``'s facts are held (possibly none), not refused."""
        held = self._held.get(key)
        return held is not None and held.refused is None

    @contextmanager
    def changing(self, key: Key | None) -> Iterator[None]:
        """Bracket a change of ``key``'s facts in Chroma (None: of any principal's)."""
        self._mark(key, 1)
        try:
            yield
        finally:
            self._mark(key, -1)

    def _mark(self, key: Key | None, step: int) -> None:
        with self._lock:
            count = self._writes.get(key, 0) + step
            if count:
                self._writes[key] = count
            else:
                self._writes.pop(key, None)
            if key is None:
                self._drop_all()
                for reading in self._reading:
                    self._reading[reading] = True
            else:
                self._drop(key)
                if key in self._reading:
                    self._reading[key] = True

    def holds_none(self, key: Key, filters: Filters) -> bool:
        """Whether ``key`` is held, unchanged since, with no fact inside ``filters``."""
        with self._lock:
            if key in self._writes or None in self._writes:
                return False
            held = self._entry(key)
            if held is None or held.refused is not None:
                return False
            if held.vectors is None:
                return True
            rows = held.rows(filters)
            return rows is not None and len(rows) == 0

    async def search(
        self, key: Key, filters: Filters, vector: list[float], limit: int
    ) -> list[Hit] | None:
        """The ``limit`` nearest facts inside ``filters`` (hits as Chroma's search gives
        them, nearest first), or None when ``key`` is not held (a load is scheduled if due:
        the caller asks Chroma)."""
        held = self._entry(key)
        if held is None or not held.serves(len(vector)):
            if held is None or cache.retry_due(held.refused, time.monotonic()):
                self._schedule(key, lambda: self._load(key))
            return None
        if held.vectors is None or limit <= 0:
            return []
        rows = held.rows(filters)
        if rows is not None and len(rows) == 0:
            return []
        width = held.vectors.shape[0] if rows is None else len(rows)
        if width * held.vectors.shape[1] > cache.LOOP_PRODUCT:
            return await asyncio.to_thread(_nearest, held, rows, vector, limit)
        return _nearest(held, rows, vector, limit)

    async def _load(self, key: Key) -> None:
        with self._lock:
            self._reading[key] = False
        try:
            loaded = await asyncio.to_thread(self._reader, key)
            held = None if loaded is None else await asyncio.to_thread(_held, loaded)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Chroma keeps serving the principal; its next search tries again.
            log.warning("loading a principal's facts failed", exc_info=True)
            with self._lock:
                self._reading.pop(key, None)
            return
        now = time.monotonic()
        with self._lock:
            # Checked and kept under one hold of the lock: a change cannot slip between.
            if self._reading.pop(key, True) or key in self._writes or None in self._writes:
                return  # changed while read: the next search loads it again
            if held is None or not self._keep(key, held, now):
                self._keep(key, CachedFacts(refused=now), now)


__all__ = ["CachedFacts", "ChromaPrincipalCache", "principal_key", "read", "supported"]
