"""A principal's fact vectors held in the service (external mode): an exact search of a
large principal without PostgreSQL visiting every one of its rows.

The exact search in the database (``facts.search_query``) reads each of the principal's
rows, so its cost grows with the principal however the rows are laid out (a covering index
did not change it). pgvector's HNSW index inside the principal's partition was no faster
for a large principal, and is approximate. Held in memory, the same principal's distances
are one matrix product; the database then returns the payloads of the nearest ids only.
The figures: docs/benchmarks.md, "Measured figures behind the design".

What keeps it exact and fresh:

- every search reads the principal's **version** (``facts.ensure_versions``: bumped by
  triggers on any statement that changes any of the principal's facts, on any replica) in
  the same round trip as the payloads; when it differs from the held one the answer is
  discarded, the search runs in the database, and the vectors are reloaded in the
  background. The version is read first in that round trip, so a fact stored before a
  search began has moved it: such a search is never answered from vectors without it;
- the payloads come from the database under the same filter as the database's search
  (group and principal, ``facts.payloads_query``): an id of another principal can never
  bring in its fact, and a fact deleted since (an erasure) has no row, so it is not
  returned, whatever is held.

Only principals with at least ``MIN_FACTS`` facts are held (below that the database's
search is already cheap); others are remembered by version only, so they are reloaded
only when they change. Memory is bounded (the vectors as float32, 16 bytes an id) and
loads run one at a time, as the per-principal vector cache (``mem0.cache``) decides for
both storage modes.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from kaos_memory.storage.mem0 import cache
from kaos_memory.storage.mem0.cache import PrincipalVectorCache
from kaos_memory.storage.mem0.pgvector import facts
from kaos_memory.storage.mem0.terms import GROUP_KEY, USER_KEY, WILDCARD, Filters, Key
from kaos_memory.storage.pgpool import Coalesced

log = logging.getLogger(__name__)

# Facts a principal needs before its vectors are held.
MIN_FACTS = 1_000


@dataclass(frozen=True)
class CachedVectors:
    """A principal's vectors at ``version``; ``unit`` is None for a principal known by
    version only (below ``MIN_FACTS``, or refused for want of room at ``refused``)."""

    version: int
    ids: Any = None  # numpy uint8 (facts, 16): the facts' uuids, in the rows' order
    unit: Any = None  # numpy float32 (facts, dims), rows scaled to length 1
    zero: Any = None  # numpy bool (facts,): rows without a direction (NaN distance)
    refused: float | None = None

    @property
    def size(self) -> int:
        if self.unit is None:
            return 0
        return int(self.unit.nbytes) + int(self.ids.nbytes) + int(self.zero.nbytes)

    def fact_id(self, row: int) -> str:
        return str(uuid.UUID(bytes=self.ids[row].tobytes()))

    def retry_due(self, now: float) -> bool:
        return cache.retry_due(self.refused, now)


def principal_of(filters: Filters) -> Key | None:
    """The ``(group, principal)`` of a principal-level filter (exactly the group and the
    principal, neither a wildcard); None for every other scope."""
    if set(filters) != {GROUP_KEY, USER_KEY}:
        return None
    group, principal = filters[GROUP_KEY], filters[USER_KEY]
    if WILDCARD in (group, principal):
        return None
    return group, principal


class PgvectorPrincipalCache(PrincipalVectorCache[CachedVectors]):
    """The held principals of one table; ``search`` answers from them or the database."""

    def __init__(self, table: str, max_bytes: int) -> None:
        super().__init__(max_bytes)
        self.table = table
        self._version_sql = facts.version_query(table).as_string(None)
        self._payloads_sql = facts.payloads_query(table).as_string(None)
        self._vectors_sql = facts.vectors_query(table).as_string(None)

    def holds(self, key: Key) -> bool:
        """Whether ``key``'s vectors are held (not only its version)."""
        held = self._held.get(key)
        return held is not None and held.unit is not None

    async def search(
        self,
        reads: Coalesced,
        key: Key,
        vector: list[float],
        exact_sql: Any,
        exact_params: list[Any],
        limit: int,
    ) -> list[Any]:
        """Rows as ``facts.search_query`` returns them (``id, distance, payload``),
        nearest first: from the held vectors when they are current, else from
        ``exact_sql`` (the database's exact search), scheduling a load if one is due."""
        held = self._entry(key)
        if held is not None and held.unit is not None and held.unit.shape[1] == len(vector):
            nearest = await self._nearest(held, vector, limit)
            ids = [held.fact_id(row) for row, _ in nearest]
            version, rows = await self._pair(reads, key, self._payloads_sql, [*key, ids])
            if version == held.version:
                payloads = {str(r[0]): r[1] for r in rows}
                return [
                    (fact, distance, payloads[fact])
                    for fact, (_, distance) in zip(ids, nearest, strict=True)
                    if fact in payloads
                ]
            self._load_later(reads.pool, key)
            _, rows = await self._pair(reads, key, exact_sql, exact_params)
            return rows
        version, rows = await self._pair(reads, key, exact_sql, exact_params)
        if held is None or held.version != version or held.retry_due(time.monotonic()):
            self._load_later(reads.pool, key)
        return rows

    async def _pair(
        self, reads: Coalesced, key: Key, query: Any, params: list[Any]
    ) -> tuple[int, list[Any]]:
        """The principal's version and ``query``'s rows, in one round trip (one snapshot:
        the version read first)."""
        found, rows = await reads.read([(self._version_sql, list(key)), (query, params)])
        return (int(found[0][0]) if found else 0), rows

    async def _nearest(
        self, held: CachedVectors, vector: list[float], limit: int
    ) -> list[tuple[int, float]]:
        if held.unit.size > cache.LOOP_PRODUCT:
            return await asyncio.to_thread(_nearest, held, vector, limit)
        return _nearest(held, vector, limit)

    def _load_later(self, pool: Any, key: Key) -> None:
        self._schedule(key, lambda: self._load(pool, key))

    async def _load(self, pool: Any, key: Key) -> None:
        try:
            held = await self._read(pool, key)
        except asyncio.CancelledError:
            raise
        except Exception:
            # The search goes on in the database; the next change tries again.
            log.warning("loading a principal's vectors failed", exc_info=True)
            return
        now = time.monotonic()
        if not self._keep(key, held, now):
            self._keep(key, CachedVectors(held.version, refused=now), now)

    async def _read(self, pool: Any, key: Key) -> CachedVectors:
        # The version first: vectors read after it are at least that new, so a change in
        # between makes the next search load again, never miss it.
        async with pool.connection() as conn:
            found = await (await conn.execute(self._version_sql, list(key))).fetchone()
            version = int(found[0]) if found else 0
            count, ids, blob = await (await conn.execute(self._vectors_sql, list(key))).fetchone()
        return await asyncio.to_thread(_held, version, count, ids, blob)


def _held(version: int, count: int, ids: bytes | None, blob: bytes | None) -> CachedVectors:
    if count < MIN_FACTS or ids is None or blob is None:
        return CachedVectors(version)
    id_rows = np.frombuffer(bytes(ids), dtype=np.uint8).reshape(count, 16)
    raw = np.frombuffer(bytes(blob), dtype=np.uint8).reshape(count, -1)
    dims = (raw.shape[1] - 4) // 4
    vectors = raw[:, 4:].copy().view(">f4").astype(np.float32).reshape(count, dims)
    norms = np.linalg.norm(vectors, axis=1)
    zero = norms == 0
    unit = (vectors / np.where(zero, 1.0, norms)[:, None]).astype(np.float32)
    return CachedVectors(version, id_rows.copy(), unit, zero)


def _nearest(held: CachedVectors, vector: list[float], limit: int) -> list[tuple[int, float]]:
    """Rows and cosine distances of the ``limit`` nearest rows, nearest first; rows or a
    query without a direction come last with a NaN distance, as pgvector orders them."""
    query = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(query))
    if norm == 0:
        distances = np.full(len(held.zero), np.nan, dtype=np.float32)
    else:
        distances = 1.0 - held.unit @ (query / norm)
        distances[held.zero] = np.nan
    order = np.where(np.isnan(distances), np.inf, distances)
    # The ``limit`` smallest in any order, then only those sorted.
    chosen = np.argpartition(order, limit)[:limit] if limit < len(order) else np.arange(len(order))
    chosen = chosen[np.argsort(order[chosen], kind="stable")]
    return [(int(i), float(distances[i])) for i in chosen]
