"""The long-term tier: Mem0 2.2.1 embedded as a library, over one vector backend.

Mem0 is synchronous, so every call runs in a bounded thread pool owned by this store; the
event loop never waits on it. Recall does not go through Mem0 (see ``search``): its query
embedding is an HTTP call on the event loop (``embedder``), its vector search the
backend's own (an async pool on pgvector, threads of its own on Chroma), so extractions
waiting on a slow model never hold a recall up.

What this store adds to Mem0, on either backend (``backend.VectorBackend``):

- The service's scope and attribution in Mem0's terms (``terms``), and a re-check of every
  returned row against the scope in Python.
- Listing with a cursor (Mem0's ``get_all`` has neither order nor offset): the backend
  pages in ``(created_at, id)`` order from an index; the cursor (``cursor``) is the last
  ``(created_at, id)`` served.
- Erasure as filtered listing plus per-id deletion (it works for every level on both
  backends, including facts without a ``user_id``), then a purge of Mem0's history
  database (``history``) of the deleted ids and of the messages of the scope and of every
  erased conversation (a session id and its principal: another principal's messages under
  the same id stay). The caller runs the erasure after the extractions in flight on those
  sessions ended, so no extraction saves erased turns after the purge.
- Recall ranking: the backend's nearest facts re-ranked with a lexical signal
  (``recall``), above the recall threshold.
- Facts over time and quarantine: reads see current facts (or those of the view asked
  for) and never quarantined ones; after a write, facts a newer one replaces are retired
  (``temporal``); text that reads as an instruction is held (``quarantine``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from kaos_core.memory.contract import Fact
from kaos_core.telemetry.genai_metrics import GenAiMetrics

from kaos_memory.crypto.kek import KeyUnreadable
from kaos_memory.crypto.keyring import Keyring, owner_of
from kaos_memory.scope import Attribution, Scope
from kaos_memory.settings import ModelSettings, StorageSettings, TierSettings
from kaos_memory.storage.base import CURRENT, FoldTag, StoredFact, TurnRow, View
from kaos_memory.storage.embedder import QueryEmbedder
from kaos_memory.storage.errors import StorageError, StorageUnavailable
from kaos_memory.storage.mem0 import expiry, portable, provenance, quarantine, sealed, temporal
from kaos_memory.storage.mem0.backend import VectorBackend, vector_backend
from kaos_memory.storage.mem0.config import build_memory
from kaos_memory.storage.mem0.cursor import decode_cursor, encode_cursor
from kaos_memory.storage.mem0.errors import wrap_longterm_error
from kaos_memory.storage.mem0.history import message_filter, purge_mem0_history
from kaos_memory.storage.mem0.recall import Recalled, ranked
from kaos_memory.storage.mem0.terms import (
    ATTEMPT_KEY,
    FOLD_KEY,
    Payload,
    Row,
    fold_filter,
    in_scope,
    mem0_filter,
    mem0_ids,
    mem0_metadata,
    mem0_principal,
    stored_ids,
    to_fact,
)
from kaos_memory.storage.quarantine import Quarantined
from kaos_memory.storage.ranking import pool_size

log = logging.getLogger(__name__)

T = TypeVar("T")

# A fold's facts are read in one listing of at most this many rows (``erase_fold``).
LIST_SCAN_LIMIT = 1_000_000
ERASE_BATCH = 1000
_EXTRACTED_ROLES = ("user", "assistant")


class Mem0LongTermStore:
    """``LongTermStore`` over an embedded Mem0 ``Memory``."""

    def __init__(
        self,
        storage: StorageSettings,
        models: ModelSettings,
        tiers: TierSettings,
        keyring: Keyring | None = None,
    ) -> None:
        self._storage = storage
        # Set: fact text and Mem0's message context are sealed (``sealed``).
        self._keyring = keyring
        self._models = models
        self._threshold = tiers.recall_threshold
        self.backend: VectorBackend = vector_backend(storage, models)
        # Recall embeds on the event loop and searches on the backend's own lanes, apart
        # from extraction's threads (``_pool``): a slow model holding every Mem0 thread in
        # an extraction must not queue a recall behind it.
        self._embedder = QueryEmbedder(models)
        self._pool: ThreadPoolExecutor | None = None
        self._memory: Any = None
        self._ping: asyncio.Future[None] | None = None
        # The probe's own thread: readiness and a strict write's check must not queue
        # behind extractions holding every Mem0 thread at a slow model.
        self._probe: ThreadPoolExecutor | None = None
        # Erasure and extraction must not interleave on Mem0's history purge.
        self._history_lock = threading.Lock()
        self._genai: GenAiMetrics | None = None

    def measure_with(self, metrics: GenAiMetrics) -> None:
        """Record each extraction call's duration and token usage in ``metrics``; before
        ``start``."""
        self._genai = metrics

    # --- lifecycle ------------------------------------------------------------------------

    async def _run(
        self,
        fn: Callable[..., T],
        *args: Any,
        lane: ThreadPoolExecutor | None = None,
    ) -> T:
        """``fn`` on Mem0's threads (or on ``lane``), its errors wrapped at this edge."""
        pool = lane or self._pool
        if pool is None:
            raise RuntimeError("long-term store is not started")
        loop = asyncio.get_running_loop()
        # In the caller's context: the model calls' spans are children of its span, and
        # an extraction's verdicts reach it (``llm.observe_answers``).
        call = functools.partial(contextvars.copy_context().run, fn, *args)
        try:
            return await loop.run_in_executor(pool, call)
        except Exception as exc:
            # The one edge where Mem0's, the vector store's and the model client's errors
            # become the storage family; anything else is a bug and stays as it is.
            wrapped = wrap_longterm_error(exc)
            if wrapped is None:
                raise
            raise wrapped from exc

    async def start(self) -> None:
        self._pool = ThreadPoolExecutor(
            max_workers=self._storage.mem0_threads, thread_name_prefix="kaos-mem0"
        )
        self._probe = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kaos-probe")
        self._memory = await self._run(self._build)
        await self._embedder.start()
        await self.backend.start()

    def _build(self) -> Any:
        """Mem0's ``Memory`` over the backend (blocking)."""
        return build_memory(
            self._storage.mem0_dir, self.backend, self._models, self._keyring, self._genai
        )

    async def close(self) -> None:
        await self._embedder.close()
        await self.backend.close()
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.shutdown(wait=False, cancel_futures=True)
        pool, self._pool = self._pool, None
        if pool is None:
            return
        memory, self._memory = self._memory, None
        if memory is not None:
            await asyncio.get_running_loop().run_in_executor(pool, _close_memory, memory)
        pool.shutdown(wait=False, cancel_futures=True)

    @property
    def memory(self) -> Any:
        if self._memory is None:
            raise RuntimeError("long-term store is not started")
        return self._memory

    async def ping(self) -> None:
        # One probe at a time: a hung vector store must not pile probes into the pool.
        if self._ping is None or self._ping.done():
            self._ping = asyncio.ensure_future(self._run(self.backend.ping, lane=self._probe))
        await asyncio.shield(self._ping)

    # --- writes ---------------------------------------------------------------------------

    async def add(
        self, turns: list[TurnRow], attribution: Attribution, infer: bool, tag: FoldTag
    ) -> list[str]:
        extracted = [t for t in turns if t.role in _EXTRACTED_ROLES]
        if not extracted:
            return []
        meta = {**mem0_metadata(attribution), FOLD_KEY: str(tag.fold_id)}
        meta[ATTEMPT_KEY] = str(tag.attempt)
        ids = mem0_ids(attribution)
        if self._keyring is not None:
            # The owner's key cached before Mem0's threads seal with it.
            try:
                await self._keyring.key_for(owner_of(attribution.principal, attribution.agent))
            except KeyUnreadable as exc:
                raise StorageUnavailable("the owner's data key does not unwrap") from exc

        def one(messages: list[dict[str, str]], fact: dict[str, str], infer: bool) -> list[str]:
            return stored_ids(self.memory.add(messages, **ids, metadata=fact, infer=infer))

        def add() -> list[str]:
            stored = provenance.add_all(
                one, extracted, infer, meta, self._models.summarization_model
            )
            # A write that asked not to infer is kept as given, with no model call: only
            # extracted facts and the facts an agent saved can retire older ones.
            if stored and infer:
                temporal.supersede_for(
                    self.memory, attribution, stored, self._models.answer_retries + 1
                )
            return stored

        return await self._run(self.backend.write, mem0_principal(attribution), add)

    async def erase_fold(self, group: str, session: str, fold_id: int) -> int:
        rows = await self._run(
            self.backend.select, fold_filter(group, session, fold_id), LIST_SCAN_LIMIT
        )
        facts = [(i, p) for i, p in rows if p is not None and p.get(FOLD_KEY) == str(fold_id)]
        if not facts:
            return 0
        return await self._run(self._delete, facts)

    async def erase_ids(self, ids: list[str]) -> int:
        return await self._run(self._delete, [(fact_id, None) for fact_id in ids])

    async def facts_created_before(self, group: str, before: str, limit: int) -> list[str]:
        """In listing order from the oldest (``expiry``: the store level's index)."""
        store = Scope(level="store", group=group, session=None, principal=None, agent=None)
        filters = mem0_filter(store)
        return await self._run(expiry.created_before, self.backend, filters, before, limit)

    async def count_facts(self, group: str, principal: str) -> int:
        scope = Scope(level="user", group=group, session=None, principal=principal, agent=None)
        return await self._run(self.backend.count, mem0_filter(scope))

    async def erase(self, scope: Scope, keys: tuple[str, ...] = ()) -> int:
        filters = mem0_filter(scope)
        deleted: list[str] = []
        seen: set[tuple[str, ...]] = set()
        while True:
            rows = await self._run(self.backend.select, filters, ERASE_BATCH)
            facts = [(i, p) for i, p in rows if p and in_scope(scope, p)]
            batch = [fact_id for fact_id, _ in facts]
            if not batch:
                break
            marker = tuple(sorted(batch))
            if marker in seen:
                raise StorageError("long-term erasure made no progress")
            seen.add(marker)
            await self._run(self._delete_rows, facts)
            deleted += batch
        await self._run(self._purge_history, deleted, scope, keys)
        return len(deleted)

    def _delete(self, facts: Sequence[Row]) -> int:
        """Delete facts, then their text from Mem0's history (blocking)."""
        count = self._delete_rows(facts)
        self._purge_history([fact_id for fact_id, _ in facts], None)
        return count

    def _delete_rows(self, facts: Sequence[Row]) -> int:
        return temporal.delete(self.memory.vector_store, self.backend, facts)

    def _purge_history(
        self, ids: list[str], scope: Scope | None, keys: tuple[str, ...] = ()
    ) -> None:
        """Remove erased text from Mem0's history DB (Mem0 keeps it after deletion): the
        facts' rows, and the messages of the scope and of the conversations ``keys``."""
        db = self.memory.db
        with self._history_lock, db._lock:
            purge_mem0_history(
                db.connection,
                ids,
                None if scope is None else message_filter(scope),
                "" if scope is None else scope.group,
                keys,
            )

    async def reclaim(self) -> None:
        await self._run(self.backend.reclaim)

    # --- reads ----------------------------------------------------------------------------

    async def search(
        self,
        scope: Scope,
        query: str,
        k: int,
        sources: frozenset[str] | None = None,
        view: View = CURRENT,
    ) -> list[Fact]:
        # Mem0's ``Memory.search`` adds only cost here: the query's embedding (a model call;
        # none for a scope known to hold no fact) and the backend's tenant-filtered vector
        # search give the pool, and ``ranking`` re-ranks it with a lexical signal.
        filters = mem0_filter(scope)
        if not query.strip() or self.backend.holds_none(filters):
            return []
        vector = await self._embedder.embed(query)
        try:
            hits = await self.backend.search(query, vector, filters, pool_size(k))
        except Exception as exc:
            wrapped = wrap_longterm_error(exc)
            if wrapped is None:
                raise
            raise wrapped from exc
        ring = self._keyring
        if ring is not None:
            batch = await ring.prepare(sealed.payload_texts(p for _, _, p in hits))
            hits = [(i, s, sealed.open_payload(ring, batch, i, p)) for i, s, p in hits]
        return ranked(scope, query, hits, Recalled(k, self._threshold, sources, view))

    async def _open_rows(self, rows: Sequence[Row]) -> Sequence[Row]:
        """Rows with their text opened; a fact whose key is gone has no payload (it reads
        as erased)."""
        ring = self._keyring
        if ring is None:
            return rows
        batch = await ring.prepare(sealed.payload_texts(p for _, p in rows))
        return [(i, sealed.open_payload(ring, batch, i, p)) for i, p in rows]

    async def _window(
        self, scope: Scope, limit: int, cursor: str | None
    ) -> tuple[list[tuple[str, Payload]], str | None]:
        """One page of the scope's rows in the backend's listing order, opened, and the
        next cursor; one row more than the page says whether another follows. The cursor
        is the last row read, not the last kept: a page of facts a caller hides still
        moves the listing on (``created_at`` is stored in the clear, sealed or not)."""
        after = None if cursor is None else decode_cursor(cursor)
        rows = await self._run(self.backend.page, mem0_filter(scope), limit + 1, after)
        window = list(rows[:limit])
        next_cursor = None
        if len(rows) > limit and window:
            last_id, last = window[-1]
            next_cursor = encode_cursor(str((last or {}).get("created_at") or ""), last_id)
        opened = await self._open_rows(window)
        return [(i, p) for i, p in opened if p and in_scope(scope, p)], next_cursor

    async def list_facts(
        self, scope: Scope, limit: int, cursor: str | None, view: View = CURRENT
    ) -> tuple[list[Fact], str | None]:
        rows, next_cursor = await self._window(scope, limit, cursor)
        return [to_fact(i, p) for i, p in rows if temporal.visible(p, view)], next_cursor

    async def export_facts(
        self, scope: Scope, limit: int, cursor: str | None
    ) -> tuple[list[StoredFact], str | None]:
        rows, next_cursor = await self._window(scope, limit, cursor)
        return [portable.stored_fact(i, p) for i, p in rows], next_cursor

    async def import_facts(self, facts: list[StoredFact]) -> int:
        if self._keyring is not None:
            # The owners' keys cached before Mem0's vector store seals with them.
            for owner in {owner_of(f.principal, f.agent) for f in facts}:
                await self._keyring.key_for(owner)
        return await self._run(portable.import_facts, self.memory, self.backend.write, facts)

    # --- quarantine ---

    async def list_quarantined(
        self, scope: Scope, limit: int, cursor: str | None
    ) -> tuple[list[Quarantined], str | None]:
        after = None if cursor is None else decode_cursor(cursor)
        rows, last = await self._run(
            quarantine.quarantined_page, self.backend, mem0_filter(scope), scope, limit, after
        )
        page = [(i, p) for i, p in await self._open_rows(rows) if p]
        found = [Quarantined(to_fact(i, p), quarantine.reason_of(p)) for i, p in page]
        return found, None if last is None else encode_cursor(*last)

    async def release(self, scope: Scope, ids: list[str]) -> int:
        rows = await self._run(quarantine.held_rows, self.memory, scope, ids)
        return await self._run(quarantine.release, self.memory, self.backend.write, rows)

    async def erase_quarantined(self, scope: Scope, ids: list[str]) -> int:
        rows = await self._run(quarantine.held_rows, self.memory, scope, ids)
        return await self._run(self._delete, rows)

    def held_principals(self) -> tuple[int, int]:
        return self.backend.stats()

    def check_cursor(self, cursor: str) -> None:
        decode_cursor(cursor)


def _close_memory(memory: Any) -> None:
    try:
        memory.close()
    except Exception:
        log.warning("closing mem0 failed", exc_info=True)


__all__ = ["Mem0LongTermStore"]
