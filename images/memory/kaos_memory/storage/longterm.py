"""The long-term tier: Mem0 2.2.1 embedded as a library, over Chroma (local) or pgvector.

Mem0 is synchronous, so every call runs in a bounded thread pool owned by this adapter;
the event loop never waits on it. Recall does not go through Mem0 (see ``search``): its
query embedding is an HTTP call on the event loop (``embedder``), its vector search a
query on an async pool (pgvector) or Chroma on threads of its own, so extractions waiting
on a slow model never hold a recall up. Mem0 is imported lazily, after ``MEM0_TELEMETRY=False``
and ``MEM0_DIR`` (inside the service's data dir) are set, because it reads both at import.

What this adapter adds to Mem0:

- The translation of the service's scope and attribution into Mem0's terms (this adapter
  alone knows them): entity ids (``user_id``/``agent_id``/``run_id``, escaped because Mem0
  rejects whitespace), the metadata every fact carries (group, session, fold, attempt), the
  filter of each level, and a re-check of every returned row against the scope in Python.
  Filters use Mem0's wildcard convention. ``"*"`` means different things on the two
  backends (Chroma drops the condition; pgvector turns it into "key present"), so the
  wildcard is only ever put on ``run_id``: every fact carries a ``run_id`` (a write needs
  a session), so "key present" and "no condition" select the same rows on both backends,
  including facts written without a principal (which have no ``user_id``).
- Listing with a cursor (Mem0's ``get_all`` has neither order nor offset): pages in
  ``(created_at, id)`` order from an index (``pgfacts`` in SQL on pgvector; ``chromafacts``
  on Chroma, an index of KAOS's own that the write and erase paths below keep and that
  repairs itself); the cursor is the last ``(created_at, id)`` served.
- Erasure as filtered listing plus per-id deletion (it works for every level on both
  backends, including facts without a ``user_id``), then a purge of Mem0's history
  database: the ``history`` rows of the deleted ids (Mem0 keeps deleted text there) and
  the ``messages`` rows (raw turns Mem0 keeps as extraction context: ``Memory.add`` reads
  the last ten of the session scope into every extraction prompt as "last messages" and
  saves the new turns after the model answered) of the scope and of every erased session.
  The caller runs the erasure after the extractions in flight on those sessions ended, so
  no extraction saves erased turns after the purge.
- Residue: Mem0's history connection deletes securely (freed pages zeroed); after an
  erasure ``reclaim`` rewrites Chroma's SQLite file (``VACUUM``, then the WAL checkpointed
  and truncated), since Chroma deletes on its own connections; on pgvector it vacuums the
  collection's tables.
- On Chroma, a purge of the deleted ids' add/update records from Chroma's write-ahead
  log (``embeddings_queue``): Chroma keeps every record's full metadata, and so the fact
  text, in that log until a much later compaction, long after the row was deleted.
  The delete records stay, so a replay of the log after a restart still deletes.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import functools
import json
import logging
import os
import re
import sqlite3
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypeVar

import numpy as np
from kaos_core.memory.contract import Fact
from kaos_core.telemetry.genai_metrics import GenAiMetrics

from kaos_memory.scope import Attribution, Scope
from kaos_memory.settings import MemorySettings
from kaos_memory.storage.base import FoldTag, TurnRow
from kaos_memory.storage.embedder import QueryEmbedder
from kaos_memory.storage.errors import StorageError, StorageUnavailable, UnusableAnswer
from kaos_memory.storage.history import null_history
from kaos_memory.storage.mem0llm import CheckedLlm, raised_unusable
from kaos_memory.storage.purge import in_child, purge_mem0_history, vacuum_sqlite
from kaos_memory.storage.ranking import fuse, pool_size

log = logging.getLogger(__name__)

T = TypeVar("T")
# A vector-store hit: fact id, similarity, payload (None when the store kept none).
Hit = tuple[str, float, dict[str, Any] | None]

# A fold's facts are read in one listing of at most this many rows (``erase_fold``).
LIST_SCAN_LIMIT = 1_000_000
ERASE_BATCH = 1000
_EXTRACTED_ROLES = ("user", "assistant")
_ID_KEYS = ("user_id", "agent_id", "run_id")
# The keys a scope's filter names (indexed in external mode, see ``pgfacts``).
TENANT_KEYS = _ID_KEYS
# Metadata keys naming the fold and the attempt that stored a fact. Strings, because the
# two vector stores compare filter values with different typing rules.
FOLD_KEY = "kaos_fold"
ATTEMPT_KEY = "kaos_attempt"


# --- scope and attribution in Mem0's terms --------------------------------------------------

WILDCARD = "*"
GROUP_KEY = "kaos_group"
RUN_KEY = "kaos_run"

# Mem0 rejects entity ids with whitespace; headers may carry it. A reversible escape keeps
# equality (and so every filter) intact. '%' is escaped first so decoding is unambiguous.
_ESCAPE_RE = re.compile(r"[%\s]")
_UNESCAPE_RE = re.compile(r"%([0-9A-F]{2,6});")


# The longest extraction answer asked of the model (see the Mem0 config below).
EXTRACTION_MAX_TOKENS = 1024


def to_entity_id(value: str) -> str:
    return _ESCAPE_RE.sub(lambda m: f"%{ord(m.group(0)):02X};", value)


def from_entity_id(value: str) -> str:
    return _UNESCAPE_RE.sub(lambda m: chr(int(m.group(1), 16)), value)


def mem0_ids(attribution: Attribution) -> dict[str, str]:
    """The entity ids a write's facts are stored under: every verified key."""
    ids = {"run_id": to_entity_id(attribution.session)}
    if attribution.principal is not None:
        ids["user_id"] = to_entity_id(attribution.principal)
    if attribution.agent is not None:
        ids["agent_id"] = to_entity_id(attribution.agent)
    return ids


def mem0_metadata(attribution: Attribution) -> dict[str, str]:
    return {GROUP_KEY: attribution.group, RUN_KEY: attribution.session}


def mem0_filter(scope: Scope) -> dict[str, str]:
    """The Mem0 filter of a scope's level (see the module docstring for the wildcard)."""
    f: dict[str, str] = {GROUP_KEY: scope.group}
    if scope.level == "session":
        assert scope.session is not None
        f["run_id"] = to_entity_id(scope.session)
        if scope.principal is not None:
            f["user_id"] = to_entity_id(scope.principal)
    elif scope.level == "agent":
        assert scope.agent is not None
        f["agent_id"] = to_entity_id(scope.agent)
        if scope.principal is not None:
            f["user_id"] = to_entity_id(scope.principal)
    elif scope.level == "user":
        assert scope.principal is not None
        f["user_id"] = to_entity_id(scope.principal)
    else:
        f["run_id"] = WILDCARD
    return f


def in_scope(scope: Scope, payload: dict[str, object]) -> bool:
    """Whether a stored fact's payload falls inside the scope (the filter, in Python).

    Used to re-check rows a backend returned, so a filter translation defect in a vector
    store cannot leak another tenant's fact into an answer.
    """
    for key, value in mem0_filter(scope).items():
        if value == WILDCARD:
            continue
        if payload.get(key) != value:
            return False
    return True


def mem0_config(settings: MemorySettings) -> dict[str, Any]:
    """The ``Memory.from_config`` dict for the configured storage mode; each model role
    with its own endpoint and key."""
    models = settings.models
    vector_store: dict[str, Any]
    if settings.storage == "local":
        vector_store = {
            "provider": "chroma",
            "config": {
                "collection_name": settings.collection,
                "path": str(settings.chroma_dir),
            },
        }
    else:
        assert settings.dsn is not None
        vector_store = {
            "provider": "pgvector",
            "config": {
                "connection_string": pgvector_dsn(settings.dsn),
                "collection_name": settings.collection,
                "embedding_model_dims": settings.embedding_dims,
                "hnsw": True,
            },
        }
    config: dict[str, Any] = {
        "vector_store": vector_store,
        "llm": {
            "provider": "openai",
            "config": {
                "model": models.summarization_model,
                "api_key": models.summarization_api_key or "unused",
                "openai_base_url": models.summarization_base_url,
                # Mem0 asks for up to 2,000 tokens. A fold's facts take a few hundred; a
                # small model that rambles (or pads its JSON with whitespace) would hold the
                # model for minutes, past the call's timeout, for an answer refused anyway.
                "max_tokens": EXTRACTION_MAX_TOKENS,
            },
        },
        "embedder": {
            "provider": "openai",
            "config": {
                "model": models.embedding_model,
                "api_key": models.embedding_api_key or "unused",
                "openai_base_url": models.embedding_base_url,
                "embedding_dims": models.embedding_dims,
            },
        },
        # External mode keeps no node-local history (see ``history``).
        "history_db_path": (
            str(settings.mem0_history_path) if settings.storage == "local" else ":memory:"
        ),
    }
    if models.extraction_prompt is not None:
        config["custom_instructions"] = models.extraction_prompt
    return config


async def _search_connection(conn: Any) -> None:
    """A search pool's connection: binary vectors, and plans for each search's values.

    The query vector goes as pgvector's binary ``vector`` (numpy float32, pgvector's
    adapter) rather than a list of floats PostgreSQL parses and casts: 0.15 ms of client
    CPU a search instead of 0.23 on a 1k-fact store (measured, 64 dimensions), and less
    parsing in the server.

    Each search is planned for its own values, also once psycopg prepared the statement
    (from its fifth run). A prepared statement's generic plan leaves the principal's
    partition to be chosen when it runs, and PostgreSQL 15 then locks every partition and
    each of their indexes first, at each execution; a plan made for the values names one
    partition and locks only it (a 1k-fact store: 0.34 ms a search against 0.42, and 0.40
    on one table). Planning a search costs less than those locks."""
    from pgvector.psycopg import register_vector_async

    await register_vector_async(conn)
    await conn.execute("SET plan_cache_mode = force_custom_plan")


def pgvector_dsn(dsn: str) -> str:
    """``dsn`` with pgvector's HNSW iterative scans on (pgvector >= 0.8).

    Without it a selective tenant filter returns fewer rows than asked, because the
    index scan stops before enough rows pass the filter. A DSN that already sets
    ``options`` is left alone: the operator chose them.
    """
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    if "options" in params:
        return dsn
    option = "-c hnsw.iterative_scan=relaxed_order"
    if dsn.startswith(("postgresql://", "postgres://")):
        from urllib.parse import quote

        sep = "&" if "?" in dsn else "?"
        return f"{dsn}{sep}options={quote(option)}"
    return make_conninfo(dsn, options=option)


def encode_cursor(created_at: str, fact_id: str) -> str:
    raw = json.dumps([created_at, fact_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[str, str]:
    """The position a cursor names; ``ValueError`` for anything not made by this service."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at, fact_id = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise ValueError("malformed cursor") from exc
    if not isinstance(created_at, str) or not isinstance(fact_id, str):
        raise ValueError("malformed cursor")
    return created_at, fact_id


def _unavailable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) says the backend or the model is down for now."""
    import openai

    temporary = (
        openai.APIConnectionError,
        openai.APITimeoutError,
        openai.RateLimitError,
        openai.InternalServerError,
        TimeoutError,
        ConnectionError,
        sqlite3.OperationalError,
    )
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return False
        if isinstance(seen, temporary):
            return True
        if "psycopg" in sys.modules:
            import psycopg

            if isinstance(seen, psycopg.OperationalError):
                return True
        seen = seen.__cause__ or seen.__context__
    return False


def wrap_longterm_error(exc: BaseException) -> StorageError | None:
    """The storage error for an error of Mem0, its vector store or its model client;
    ``None`` for anything else (a bug)."""
    import openai
    from mem0.exceptions import MemoryError as Mem0Error

    known: tuple[type[BaseException], ...] = (
        Mem0Error,
        openai.APIError,
        sqlite3.Error,
        TimeoutError,
        ConnectionError,
    )
    if "psycopg" in sys.modules:
        import psycopg

        known += (psycopg.Error,)
    module = type(exc).__module__ or ""
    if not isinstance(exc, known) and not module.startswith("chromadb"):
        return None
    if raised_unusable(exc):
        return UnusableAnswer("the extraction model gave no usable answer")
    if _unavailable(exc):
        return StorageUnavailable("long-term store unavailable")
    return StorageError("long-term store failed")


def _fact(item: dict[str, Any]) -> Fact:
    def decoded(key: str) -> str | None:
        value = item.get(key)
        return None if value is None else from_entity_id(str(value))

    return Fact(
        id=str(item["id"]),
        text=str(item.get("memory") or ""),
        score=item.get("score"),
        agent_id=decoded("agent_id"),
        user_id=decoded("user_id"),
        session_id=decoded("run_id"),
        created_at=str(item.get("created_at") or ""),
    )


class Mem0LongTermStore:
    """``LongTermStore`` over an embedded Mem0 ``Memory``."""

    def __init__(self, settings: MemorySettings) -> None:
        self.settings = settings
        self.backend = "chroma" if settings.storage == "local" else "pgvector"
        self._pool: ThreadPoolExecutor | None = None
        # Recall's own lanes, apart from extraction's threads (``_pool``): a slow model
        # holding every Mem0 thread in an extraction must not queue a recall behind it.
        self._embedder = QueryEmbedder(settings.models)
        self._searches: ThreadPoolExecutor | None = None
        self._pg: Any = None  # pgpool.Coalesced over the search pool (external mode)
        # pgvectors.PrincipalVectors (external mode, once pgfacts.ensure_versions succeeded)
        self._vectors: Any = None
        # chromaheld.ChromaHeld (local mode, unless the budget is 0)
        self._held: Any = None
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
        **kwargs: Any,
    ) -> T:
        """``fn`` on Mem0's threads (or on ``lane``), its errors wrapped at this edge."""
        pool = lane or self._pool
        if pool is None:
            raise RuntimeError("long-term store is not started")
        loop = asyncio.get_running_loop()
        # In the caller's context: the model calls' spans are children of its span, and
        # an extraction's verdicts reach it (``mem0llm.observe_answers``).
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        try:
            return await loop.run_in_executor(pool, call)
        except Exception as exc:
            # The one edge where Mem0's, Chroma's, pgvector's and the model client's
            # errors become the storage family; anything else is a bug and stays as it is.
            wrapped = wrap_longterm_error(exc)
            if wrapped is None:
                raise
            raise wrapped from exc

    async def start(self) -> None:
        self._pool = ThreadPoolExecutor(
            max_workers=self.settings.mem0_threads, thread_name_prefix="kaos-mem0"
        )
        self._probe = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kaos-probe")
        await self._run(self._build)
        await self._embedder.start()
        if self.backend == "pgvector":
            assert self.settings.dsn is not None
            from kaos_memory.storage import pgpool

            # Searches on the event loop: no thread per waiting query (``pgpool``).
            try:
                pool = await pgpool.open_pool(
                    pgvector_dsn(self.settings.dsn),
                    self.settings.pg_pool_size,
                    configure=_search_connection,
                )
                self._pg = pgpool.Coalesced(pool)
            except Exception as exc:
                raise StorageUnavailable("long-term store unavailable") from exc
        else:
            self._searches = ThreadPoolExecutor(
                max_workers=self.settings.mem0_threads, thread_name_prefix="kaos-recall"
            )

    def _build(self) -> None:
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ["MEM0_DIR"] = str(self.settings.mem0_dir)
        self.settings.mem0_dir.mkdir(parents=True, exist_ok=True)
        if self.settings.storage == "local":
            self.settings.chroma_dir.mkdir(parents=True, exist_ok=True)
        from mem0 import Memory

        memory = Memory.from_config(mem0_config(self.settings))
        if self.settings.storage == "local":
            from kaos_memory.storage import chromafacts

            # Deleted history and message rows are overwritten, not left in free pages.
            with memory.db._lock:
                memory.db.connection.execute("PRAGMA secure_delete=ON")
            # The listing index: facts written before it, or by a write cut short by a
            # crash, are indexed now.
            chromafacts.ensure(memory)
            from kaos_memory.storage import chromaheld

            if self.settings.vector_cache_mb > 0 and chromaheld.supported(memory):
                self._held = chromaheld.ChromaHeld(
                    self.settings.vector_cache_mb * 2**20,
                    functools.partial(chromaheld.read, memory),
                )
        if self.settings.storage == "external":
            memory.db.close()
            memory.db = null_history()
            # Mem0 builds its pgvector pool without a connection check, so after a
            # PostgreSQL restart it would hand out dead connections until each failed
            # once; checking on checkout makes the tier recover by itself.
            pool = getattr(memory.vector_store, "connection_pool", None)
            if pool is not None and hasattr(pool, "_check"):
                from psycopg_pool import ConnectionPool

                pool._check = ConnectionPool.check_connection
            if pool is not None:
                import psycopg

                from kaos_memory.storage import pgfacts

                # Mem0 creates its table on first use; the indexes need it now. A new
                # table is partitioned by principal first.
                if self.settings.pg_partitions > 0:
                    pgfacts.create_partitioned(
                        memory.vector_store,
                        self.settings.embedding_dims,
                        self.settings.pg_partitions,
                    )
                memory.vector_store._ensure_collection()
                try:
                    pgfacts.ensure_indexes(pool, self.settings.collection)
                except psycopg.Error:
                    # Two replicas creating the same index at once: one loses the race.
                    # Searches stay correct without them, only slower; the next start
                    # creates them.
                    log.warning("creating the tenant indexes failed", exc_info=True)
                if self.settings.vector_cache_mb > 0:
                    try:
                        pgfacts.ensure_versions(pool, self.settings.collection)
                    except psycopg.Error:
                        # Without the versions nothing held could be checked: every
                        # search stays in the database.
                        log.warning("creating the principal versions failed", exc_info=True)
                    else:
                        from kaos_memory.storage.pgvectors import PrincipalVectors

                        self._vectors = PrincipalVectors(
                            self.settings.collection, self.settings.vector_cache_mb * 2**20
                        )
        # Bounded model calls: Mem0 builds its OpenAI clients with the library defaults
        # (10 min timeout, 2 retries); the service's executor owns retries instead.
        memory.llm.client = memory.llm.client.with_options(
            timeout=self.settings.model_timeout, max_retries=0
        )
        memory.embedding_model.client = memory.embedding_model.client.with_options(
            timeout=self.settings.embed_timeout, max_retries=0
        )
        # Mem0 turns an extraction answer it cannot parse into "no facts"; KAOS judges
        # each answer first (``mem0llm``).
        memory.llm = CheckedLlm(
            memory.llm,
            model=self.settings.models.summarization_model,
            retries=self.settings.models.answer_retries,
            metrics=self._genai,
        )
        self._memory = memory

    async def close(self) -> None:
        await self._embedder.close()
        for held in (self._vectors, self._held):
            if held is not None:
                await held.close()
        self._vectors = self._held = None
        pg, self._pg = self._pg, None
        if pg is not None:
            await pg.close()
        for lane in (self._searches, self._probe):
            if lane is not None:
                lane.shutdown(wait=False, cancel_futures=True)
        self._searches = self._probe = None
        pool, self._pool = self._pool, None
        if pool is None:
            return
        memory, self._memory = self._memory, None
        if memory is not None:
            await asyncio.get_running_loop().run_in_executor(pool, self._close_memory, memory)
        pool.shutdown(wait=False, cancel_futures=True)

    @staticmethod
    def _close_memory(memory: Any) -> None:
        try:
            memory.close()
        except Exception:
            log.warning("closing mem0 failed", exc_info=True)
        pool = getattr(memory.vector_store, "connection_pool", None)
        if pool is not None:
            try:
                pool.close()
            except Exception:
                log.warning("closing the pgvector pool failed", exc_info=True)

    @property
    def memory(self) -> Any:
        if self._memory is None:
            raise RuntimeError("long-term store is not started")
        return self._memory

    async def ping(self) -> None:
        # One probe at a time: a hung vector store must not pile probes into the pool.
        if self._ping is None or self._ping.done():
            self._ping = asyncio.ensure_future(self._run(self._ping_sync, lane=self._probe))
        await asyncio.shield(self._ping)

    def _ping_sync(self) -> None:
        store = self.memory.vector_store
        if self.backend == "chroma":
            store.collection.count()
        else:
            store.list(filters={"run_id": WILDCARD}, top_k=1)

    # --- add ------------------------------------------------------------------------------

    async def add(
        self, turns: list[TurnRow], attribution: Attribution, infer: bool, tag: FoldTag
    ) -> list[str]:
        return await self._run(self._add_sync, turns, attribution, infer, tag)

    def _add_sync(
        self, turns: list[TurnRow], attribution: Attribution, infer: bool, tag: FoldTag
    ) -> list[str]:
        messages = [
            {"role": t.role, "content": t.content} for t in turns if t.role in _EXTRACTED_ROLES
        ]
        if not messages:
            return []
        metadata = {
            **mem0_metadata(attribution),
            FOLD_KEY: str(tag.fold_id),
            ATTEMPT_KEY: str(tag.attempt),
        }
        principal = None
        if attribution.principal is not None:
            principal = (attribution.group, to_entity_id(attribution.principal))
        # Mem0's inference changes only facts under the same principal's id; without a
        # principal, any.
        with self._changing(principal):
            try:
                result = self.memory.add(
                    messages, **mem0_ids(attribution), metadata=metadata, infer=infer
                )
            except BaseException:
                # Mem0 may have stored facts before it failed, and their ids are lost.
                self._index_stale()
                raise
            ids = [str(r["id"]) for r in result.get("results", []) if "id" in r]
            if self.backend == "chroma":
                from kaos_memory.storage import chromafacts

                try:
                    chromafacts.record(self.memory, ids)
                except Exception:
                    # The facts are stored: failing the write would store them twice on
                    # retry.
                    log.warning("indexing new facts failed", exc_info=True)
                    self._index_stale()
        return ids

    def _changing(self, principal: tuple[str, str] | None) -> AbstractContextManager[None]:
        """Bracket a change of Chroma's facts (local mode's held facts, ``chromaheld``):
        of ``principal``'s facts, or of anyone's (None)."""
        if self._held is None:
            return nullcontext()
        changing: AbstractContextManager[None] = self._held.changing(principal)
        return changing

    def _index_stale(self) -> None:
        """Have the next listing reconcile the Chroma listing index first."""
        if self.backend != "chroma":
            return
        from kaos_memory.storage import chromafacts

        try:
            chromafacts.mark_stale(self.memory)
        except Exception:
            # The periodic count check and the next start reconcile it anyway.
            log.warning("marking the listing index stale failed", exc_info=True)

    async def erase_fold(self, group: str, session: str, fold_id: int) -> int:
        return await self._run(self._erase_fold_sync, group, session, fold_id)

    def _erase_fold_sync(self, group: str, session: str, fold_id: int) -> int:
        filters = {
            GROUP_KEY: group,
            RUN_KEY: session,
            "run_id": to_entity_id(session),
            FOLD_KEY: str(fold_id),
        }
        if self.backend == "pgvector":
            rows = self._pg_page(filters, LIST_SCAN_LIMIT, None)
        else:
            listed = self.memory.vector_store.list(filters=filters, top_k=LIST_SCAN_LIMIT)
            if listed and isinstance(listed[0], list):
                listed = listed[0]
            rows = [(str(r.id), r.payload) for r in listed]
        facts = [(i, p) for i, p in rows if p is not None and p.get(FOLD_KEY) == str(fold_id)]
        if not facts:
            return 0
        if self.backend == "pgvector":
            return self._delete_pg(facts)
        return self._erase_ids_sync([fact_id for fact_id, _ in facts])

    # --- reads ----------------------------------------------------------------------------

    async def search(self, scope: Scope, query: str, top_k: int) -> list[Fact]:
        if not query.strip():
            return []
        # Mem0's own ``Memory.search`` adds nothing for KAOS's stores (no keyword search on
        # Chroma, no entity store) but cost: the query's embedding (``embedder``) and the
        # store's tenant-filtered vector search give the pool, and ``ranking`` re-ranks it
        # with a lexical signal.
        vector = await self._embedder.embed(query)
        filters, size = mem0_filter(scope), pool_size(top_k)
        try:
            if self._pg is not None:
                hits = await self._pg_search(vector, filters, size)
            else:
                hits = await self._chroma_search(query, vector, filters, size)
        except Exception as exc:
            wrapped = wrap_longterm_error(exc)
            if wrapped is None:
                raise
            raise wrapped from exc
        return self._ranked(scope, query, hits, top_k)

    async def _pg_search(
        self, vector: list[float], filters: dict[str, str], size: int
    ) -> list[Hit]:
        from kaos_memory.storage import pgfacts
        from kaos_memory.storage.pgvectors import principal_of

        # A float32 array: sent as pgvector's binary vector (``_search_connection``).
        query, params = pgfacts.search_query(
            self.settings.collection, np.asarray(vector, dtype=np.float32), filters, size
        )
        # A principal's whole scope: its vectors may be held (``pgvectors``).
        key = principal_of(filters) if self._vectors is not None else None
        if key is not None:
            rows = await self._vectors.search(self._pg, key, vector, query, params, size)
        else:
            (rows,) = await self._pg.read([(query, params)])
        return list(pgfacts.hits(rows))

    async def _chroma_search(
        self, query: str, vector: list[float], filters: dict[str, str], size: int
    ) -> list[Hit]:
        if self._searches is None:
            raise RuntimeError("long-term store is not started")
        if self._held is not None:
            from kaos_memory.storage.chromaheld import principal_key

            key = principal_key(filters)
            if key is not None:
                hits: list[Hit] | None = await self._held.search(key, filters, vector, size)
                if hits is not None:
                    return hits
        return await asyncio.get_running_loop().run_in_executor(
            self._searches, self._chroma_query, query, vector, filters, size
        )

    def _chroma_query(
        self, query: str, vector: list[float], filters: dict[str, str], size: int
    ) -> list[Hit]:
        """The scope's ``size`` nearest facts on Chroma: by the ids the listing index holds
        for the scope (``chromafacts.scope_ids``: cost grows with the tenant, not the
        store), else by Chroma's own filter. Either way ``_ranked`` re-checks the scope."""
        from chromadb.errors import InternalError

        from kaos_memory.storage import chromafacts

        store = self.memory.vector_store
        # The collection is the group, so Chroma is never asked to match the group key;
        # a scope without a tenant key (the whole store) needs no ids either.
        tenant = {k: v for k, v in filters.items() if k != GROUP_KEY}
        bounded = any(v != WILDCARD for v in tenant.values())
        ids = chromafacts.scope_ids(self.memory, filters) if bounded else None
        if ids == []:
            return []
        hits = None
        if ids is not None:
            try:
                found = store.collection.query(
                    query_embeddings=[vector],
                    ids=ids,
                    n_results=min(size, len(ids)),
                    include=["metadatas", "distances"],
                )
            except InternalError:
                # An indexed id Chroma no longer has (deleted behind KAOS's back): this
                # search filters in Chroma; a listing page or the next start repairs it.
                log.warning("searching by indexed ids failed; filtering in Chroma")
            else:
                hits = store._parse_output(found)
        if hits is None:
            hits = store.search(query=query, vectors=vector, top_k=size, filters=tenant or None)
        return [(str(h.id), h.score or 0.0, h.payload) for h in hits]

    def _ranked(self, scope: Scope, query: str, hits: list[Hit], top_k: int) -> list[Fact]:
        threshold = self.settings.recall_threshold
        pool = [
            (fact_id, score, payload)
            for fact_id, score, payload in hits
            if payload is not None
            and payload.get("data")
            and score >= threshold
            and in_scope(scope, payload)
        ]
        ranked = fuse(query, [str(p["data"]) for _, _, p in pool], [s for _, s, _ in pool])
        facts = []
        for i, fused in ranked[:top_k]:
            fact_id, _, payload = pool[i]
            facts.append(
                _fact({**payload, "id": fact_id, "memory": payload["data"], "score": fused})
            )
        return facts

    async def list_facts(
        self, scope: Scope, limit: int, cursor: str | None
    ) -> tuple[list[Fact], str | None]:
        after = None if cursor is None else decode_cursor(cursor)
        return await self._run(self._list_sync, scope, limit, after)

    def _list_sync(
        self, scope: Scope, limit: int, after: tuple[str, str] | None
    ) -> tuple[list[Fact], str | None]:
        """One page in the index's order (``pgfacts`` on pgvector, ``chromafacts`` on
        Chroma); one row more than the page says whether another follows."""
        rows: list[tuple[str, dict[str, Any]]]
        if self.backend == "pgvector":
            rows = self._pg_page(mem0_filter(scope), limit + 1, after)
        else:
            from kaos_memory.storage import chromafacts

            rows = chromafacts.page(self.memory, mem0_filter(scope), limit + 1, after)
        items = [
            {"id": fact_id, "memory": payload.get("data", ""), **payload}
            for fact_id, payload in rows
            if payload and in_scope(scope, payload)
        ]
        page = items[:limit]
        next_cursor = None
        if len(rows) > limit and page:
            last = page[-1]
            next_cursor = encode_cursor(str(last.get("created_at") or ""), str(last["id"]))
        return [_fact(i) for i in page], next_cursor

    def _rows(self, scope: Scope, top_k: int) -> list[Any]:
        """Vector-store rows of the scope (filter applied by the store, then re-checked)."""
        listed = self.memory.vector_store.list(filters=mem0_filter(scope), top_k=top_k)
        if listed and isinstance(listed[0], list):
            listed = listed[0]
        return [r for r in listed if r.payload is not None and in_scope(scope, r.payload)]

    # --- erasure --------------------------------------------------------------------------

    async def erase(self, scope: Scope, sessions: tuple[str, ...] = ()) -> int:
        return await self._run(self._erase_sync, scope, sessions)

    def _erase_sync(self, scope: Scope, sessions: tuple[str, ...] = ()) -> int:
        deleted: list[str] = []
        seen: set[tuple[str, ...]] = set()
        while True:
            facts = self._erasable(scope)
            batch = [fact_id for fact_id, _ in facts]
            if not batch:
                break
            marker = tuple(sorted(batch))
            if marker in seen:
                raise StorageError("long-term erasure made no progress")
            seen.add(marker)
            if self.backend == "pgvector":
                self._delete_pg(facts)
                deleted += batch
                continue
            # Out of the index first: a search names indexed ids, and Chroma refuses an
            # id it does not hold.
            self._forget(batch)
            for fact_id in batch:
                self._delete_one(fact_id)
                deleted.append(fact_id)
        self._purge_history(deleted, scope, sessions)
        return len(deleted)

    async def erase_ids(self, ids: list[str]) -> int:
        return await self._run(self._erase_ids_sync, ids)

    def _erase_ids_sync(self, ids: list[str]) -> int:
        self._forget(ids)
        count = sum(self._delete_one(i) for i in ids)
        self._purge_history(ids, None)
        return count

    def _pg_page(
        self, filters: dict[str, str], limit: int, after: tuple[str, str] | None
    ) -> list[tuple[str, dict[str, Any]]]:
        """Up to ``limit`` facts inside ``filters`` on pgvector, in listing order after
        ``after`` (``pgfacts.page``): through KAOS's indexes with the keys as literals, one
        partition for a principal, where Mem0's own listing binds the keys and so reads
        every row of the store."""
        from kaos_memory.storage import pgfacts

        store = self.memory.vector_store
        return pgfacts.page(store.connection_pool, store.collection_name, filters, limit, after)

    def _erasable(self, scope: Scope) -> list[tuple[str, dict[str, Any]]]:
        """The next batch of the scope's facts to erase (id and payload), as a listing page
        on pgvector (``_pg_page``)."""
        if self.backend == "pgvector":
            rows = self._pg_page(mem0_filter(scope), ERASE_BATCH, None)
            return [(i, p) for i, p in rows if p and in_scope(scope, p)]
        return [(str(r.id), r.payload) for r in self._rows(scope, ERASE_BATCH)]

    def _delete_pg(self, facts: list[tuple[str, dict[str, Any]]]) -> int:
        """Delete facts from pgvector naming their principals (``pgfacts.delete``). What
        Mem0's delete does besides is switched off in external mode (history) or has
        nothing to do: Mem0 links entities only with spaCy, which the image does not ship,
        so its entity store stays empty."""
        from kaos_memory.storage import pgfacts

        store = self.memory.vector_store
        return pgfacts.delete(store.connection_pool, store.collection_name, facts)

    def _forget(self, ids: list[str]) -> None:
        """Drop facts about to be deleted from the Chroma listing index (a fact whose
        deletion then fails is indexed again by the next reconcile: the count check of a
        listing page, or the next start)."""
        if self.backend == "chroma" and ids:
            from kaos_memory.storage import chromafacts

            chromafacts.forget(self.memory, ids)

    def _delete_one(self, fact_id: str) -> bool:
        try:
            # Whose fact it is, the deletion does not say: every held principal is dropped.
            with self._changing(None):
                self.memory.delete(fact_id)
        except ValueError:
            return False  # already gone: another erasure got there first
        return True

    def _purge_history(
        self, ids: list[str], scope: Scope | None, sessions: tuple[str, ...] = ()
    ) -> None:
        """Remove erased text from Mem0's history DB (Mem0 keeps it after deletion)."""
        if self.backend == "chroma":
            in_child("chroma-log", self.settings.chroma_dir / "chroma.sqlite3", ids)
        db = self.memory.db
        wanted = None if scope is None else mem0_filter(scope)
        runs = [to_entity_id(s) for s in sessions]
        with self._history_lock, db._lock:
            purge_mem0_history(db.connection, ids, wanted, runs)

    async def reclaim(self) -> None:
        await self._run(self._reclaim_sync)

    def _reclaim_sync(self) -> None:
        if self.backend == "chroma":
            from kaos_memory.storage import chromafacts

            in_child("vacuum", self.settings.chroma_dir / "chroma.sqlite3")
            vacuum_sqlite(chromafacts.index_file(self.memory))
            return
        store = self.memory.vector_store
        pool = getattr(store, "connection_pool", None)
        if pool is None:
            return
        from psycopg import sql

        tables = [self.settings.collection, f"{self.settings.collection}_entities"]
        with pool.connection() as conn:
            conn.autocommit = True
            try:
                for table in tables:
                    if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
                        continue
                    conn.execute(sql.SQL("VACUUM {}").format(sql.Identifier(table)))
            finally:
                conn.autocommit = False

    def held_principals(self) -> tuple[int, int]:
        held = self._vectors if self._held is None else self._held
        if held is None:
            return 0, 0
        stats: tuple[int, int] = held.stats()
        return stats

    def check_cursor(self, cursor: str) -> None:
        decode_cursor(cursor)


__all__ = [
    "GROUP_KEY",
    "Mem0LongTermStore",
    "decode_cursor",
    "encode_cursor",
    "from_entity_id",
    "in_scope",
    "mem0_config",
    "mem0_filter",
    "mem0_ids",
    "mem0_metadata",
    "to_entity_id",
]
