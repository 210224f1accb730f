"""The conversational tiers in SQL, shared by the SQLite and PostgreSQL backends.

One implementation of the window, digest, fold and attribution-index logic over a
DB-API connection, behind one explicit executor boundary: every call runs in a small
thread pool (one thread for SQLite, whose file has a single writer; a few for
PostgreSQL), so the event loop never blocks on the database. A backend only supplies a
``Dialect``: its DDL, its placeholder style, its per-key lock and its transactions.

Tables (every name prefixed ``kaos_mem_`` so they sit beside Mem0's pgvector table):

- ``turns``: one row per turn, keyed by ``kaos_group:<group>|run:<session>``, with its
  attribution and ``folded_by`` (the fold that evicted it; NULL while in the window).
- ``digests``: append-only digest versions per key; older versions pruned past retention.
- ``folds``: one row per evicted batch (first/last seq, digest version, digest and
  extraction status), so each evicted turn is covered by exactly one fold.
- ``attribution``: the erasure/attribution index, one row per (key, principal, agent).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from kaos_memory.compaction import select_fold
from kaos_memory.scope import Attribution
from kaos_memory.storage.base import (
    ActiveStats,
    Digest,
    Erased,
    ErasureSelector,
    Fold,
    FoldPolicy,
    NewTurn,
    TurnRow,
)

T = TypeVar("T")

# Principal/agent "absent" in the attribution index: headers can never be empty, so the
# empty string cannot collide with a real value, and it keeps the primary key total.
NONE = ""

TURN_COLUMNS = "seq, role, content, tokens, at, principal, agent, infer"


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def execute(self, query: Any, params: Any = ...) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Dialect(Protocol):
    """What a SQL backend provides to ``SqlConversationStore``."""

    threads: int

    def open(self) -> None: ...

    def close(self) -> None: ...

    def schema(self) -> list[str]: ...

    def q(self, text: str) -> str:
        """``text`` with ``%s`` placeholders turned into the driver's style."""
        ...

    def transaction(self) -> AbstractContextManager[Cursor]: ...

    def lock_key(self, cur: Cursor, key: str) -> None:
        """Serialise fold and digest work on one key (across replicas where possible)."""
        ...


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def _turn(row: tuple[Any, ...]) -> TurnRow:
    seq, role, content, tokens, at, principal, agent, infer = row
    return TurnRow(
        seq=int(seq),
        role=role,
        content=content,
        tokens=int(tokens),
        at=at,
        principal=principal,
        agent=agent,
        infer=bool(infer),
    )


class SqlConversationStore:
    """``ConversationStore`` over any ``Dialect``."""

    def __init__(self, dialect: Dialect) -> None:
        self._db = dialect
        self._pool: ThreadPoolExecutor | None = None

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        if self._pool is None:
            raise RuntimeError("conversation store is not started")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))

    async def start(self) -> None:
        self._pool = ThreadPoolExecutor(
            max_workers=self._db.threads, thread_name_prefix="kaos-conversation"
        )
        await self._run(self._start_sync)

    def _start_sync(self) -> None:
        self._db.open()
        with self._db.transaction() as cur:
            for stmt in self._db.schema():
                cur.execute(stmt)

    async def close(self) -> None:
        if self._pool is None:
            return
        try:
            await self._run(self._db.close)
        finally:
            self._pool.shutdown(wait=False)
            self._pool = None

    async def ping(self) -> None:
        await self._run(self._ping_sync)

    def _ping_sync(self) -> None:
        with self._db.transaction() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()

    # --- writes ---------------------------------------------------------------------------

    async def append(
        self, attribution: Attribution, turns: list[NewTurn], infer: bool
    ) -> ActiveStats:
        return await self._run(self._append_sync, attribution, turns, infer)

    def _append_sync(
        self, attribution: Attribution, turns: list[NewTurn], infer: bool
    ) -> ActiveStats:
        q = self._db.q
        key = attribution.key
        at = now_iso()
        with self._db.transaction() as cur:
            for turn in turns:
                cur.execute(
                    q(
                        "INSERT INTO kaos_mem_turns (key, role, content, tokens, at, principal,"
                        " agent, infer) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                    ),
                    (
                        key,
                        turn.role,
                        turn.content,
                        turn.tokens,
                        at,
                        attribution.principal,
                        attribution.agent,
                        infer,
                    ),
                )
            cur.execute(
                q(
                    "INSERT INTO kaos_mem_attribution (key, grp, session, principal, agent)"
                    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
                ),
                (
                    key,
                    attribution.group,
                    attribution.session,
                    attribution.principal or NONE,
                    attribution.agent or NONE,
                ),
            )
            cur.execute(
                q(
                    "SELECT COALESCE(SUM(tokens), 0), COUNT(*) FROM kaos_mem_turns"
                    " WHERE key = %s AND folded_by IS NULL"
                ),
                (key,),
            )
            tokens, events = cur.fetchone()
        return ActiveStats(tokens=int(tokens), events=int(events))

    # --- reads ----------------------------------------------------------------------------

    async def window_rows(self, key: str, limit: int) -> list[TurnRow]:
        return await self._run(self._window_rows_sync, key, limit)

    def _window_rows_sync(self, key: str, limit: int) -> list[TurnRow]:
        with self._db.transaction() as cur:
            cur.execute(
                self._db.q(
                    f"SELECT {TURN_COLUMNS} FROM kaos_mem_turns"
                    " WHERE key = %s AND folded_by IS NULL ORDER BY seq DESC LIMIT %s"
                ),
                (key, limit),
            )
            return [_turn(r) for r in cur.fetchall()]

    async def is_attributed(self, key: str, principal: str) -> bool:
        return await self._run(self._is_attributed_sync, key, principal)

    def _is_attributed_sync(self, key: str, principal: str) -> bool:
        with self._db.transaction() as cur:
            cur.execute(
                self._db.q(
                    "SELECT 1 FROM kaos_mem_attribution WHERE key = %s AND principal = %s LIMIT 1"
                ),
                (key, principal),
            )
            return cur.fetchone() is not None

    async def latest_digest(self, key: str) -> Digest | None:
        return await self._run(self._latest_digest_sync, key)

    def _latest_digest_sync(self, key: str) -> Digest | None:
        with self._db.transaction() as cur:
            return self._latest_digest_in(cur, key)

    def _latest_digest_in(self, cur: Cursor, key: str) -> Digest | None:
        cur.execute(
            self._db.q(
                "SELECT version, summary FROM kaos_mem_digests WHERE key = %s"
                " ORDER BY version DESC LIMIT 1"
            ),
            (key,),
        )
        row = cur.fetchone()
        return None if row is None else Digest(version=int(row[0]), summary=row[1])

    # --- folding --------------------------------------------------------------------------

    async def claim_fold(self, attribution: Attribution, policy: FoldPolicy) -> Fold | None:
        return await self._run(self._claim_fold_sync, attribution, policy)

    def _claim_fold_sync(self, attribution: Attribution, policy: FoldPolicy) -> Fold | None:
        q = self._db.q
        key = attribution.key
        with self._db.transaction() as cur:
            self._db.lock_key(cur, key)
            cur.execute(
                q(
                    "SELECT seq, tokens FROM kaos_mem_turns WHERE key = %s AND folded_by IS NULL"
                    " ORDER BY seq"
                ),
                (key,),
            )
            sizes = [(int(s), int(t)) for s, t in cur.fetchall()]
            count = select_fold(sizes, policy)
            if count == 0:
                return None
            first_seq, last_seq = sizes[0][0], sizes[count - 1][0]
            cur.execute(
                q(
                    "INSERT INTO kaos_mem_folds (key, session, first_seq, last_seq, turns,"
                    " tokens, digest_status, extraction_status, created_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s, 'pending', 'pending', %s) RETURNING id"
                ),
                (
                    key,
                    attribution.session,
                    first_seq,
                    last_seq,
                    count,
                    sum(t for _, t in sizes[:count]),
                    now_iso(),
                ),
            )
            fold_id = int(cur.fetchone()[0])
            cur.execute(
                q(
                    "UPDATE kaos_mem_turns SET folded_by = %s WHERE key = %s"
                    " AND folded_by IS NULL AND seq BETWEEN %s AND %s"
                ),
                (fold_id, key, first_seq, last_seq),
            )
            turns = self._fold_turns(cur, fold_id)
        return Fold(id=fold_id, key=key, session=attribution.session, turns=turns)

    def _fold_turns(self, cur: Cursor, fold_id: int) -> list[TurnRow]:
        cur.execute(
            self._db.q(
                f"SELECT {TURN_COLUMNS} FROM kaos_mem_turns WHERE folded_by = %s ORDER BY seq"
            ),
            (fold_id,),
        )
        return [_turn(r) for r in cur.fetchall()]

    async def pending_digest_folds(self, key: str) -> list[Fold]:
        return await self._run(self._pending_digest_folds_sync, key)

    def _pending_digest_folds_sync(self, key: str) -> list[Fold]:
        with self._db.transaction() as cur:
            cur.execute(
                self._db.q(
                    "SELECT id, session FROM kaos_mem_folds WHERE key = %s"
                    " AND digest_status <> 'done' ORDER BY id"
                ),
                (key,),
            )
            heads = [(int(i), s) for i, s in cur.fetchall()]
            return [
                Fold(id=i, key=key, session=s, turns=self._fold_turns(cur, i)) for i, s in heads
            ]

    async def add_digest(
        self, key: str, summary: str, fold_ids: list[int], retention: int
    ) -> int | None:
        return await self._run(self._add_digest_sync, key, summary, fold_ids, retention)

    def _add_digest_sync(
        self, key: str, summary: str, fold_ids: list[int], retention: int
    ) -> int | None:
        q = self._db.q
        with self._db.transaction() as cur:
            self._db.lock_key(cur, key)
            pending = 0
            for fold_id in fold_ids:
                cur.execute(
                    q(
                        "SELECT 1 FROM kaos_mem_folds WHERE id = %s AND key = %s"
                        " AND digest_status <> 'done'"
                    ),
                    (fold_id, key),
                )
                pending += cur.fetchone() is not None
            if pending != len(fold_ids) or not fold_ids:
                return None
            latest = self._latest_digest_in(cur, key)
            version = 1 if latest is None else latest.version + 1
            cur.execute(
                q(
                    "INSERT INTO kaos_mem_digests (key, version, summary, created_at)"
                    " VALUES (%s, %s, %s, %s)"
                ),
                (key, version, summary, now_iso()),
            )
            for fold_id in fold_ids:
                cur.execute(
                    q(
                        "UPDATE kaos_mem_folds SET digest_status = 'done', digest_version = %s"
                        " WHERE id = %s"
                    ),
                    (version, fold_id),
                )
            cur.execute(
                q("DELETE FROM kaos_mem_digests WHERE key = %s AND version <= %s"),
                (key, version - retention),
            )
        return version

    async def set_extraction(self, fold_id: int, status: str) -> bool:
        return await self._run(self._set_extraction_sync, fold_id, status)

    def _set_extraction_sync(self, fold_id: int, status: str) -> bool:
        with self._db.transaction() as cur:
            cur.execute(
                self._db.q("UPDATE kaos_mem_folds SET extraction_status = %s WHERE id = %s"),
                (status, fold_id),
            )
            return cur.rowcount > 0

    # --- erasure --------------------------------------------------------------------------

    async def erase(self, selector: ErasureSelector) -> Erased:
        return await self._run(self._erase_sync, selector)

    def _erase_sync(self, selector: ErasureSelector) -> Erased:
        q = self._db.q
        with self._db.transaction() as cur:
            if selector.key is not None:
                keys = [selector.key]
            else:
                where, params = ["grp = %s"], [selector.group]
                if selector.principal is not None:
                    where.append("principal = %s")
                    params.append(selector.principal)
                if selector.agent is not None:
                    where.append("agent = %s")
                    params.append(selector.agent)
                cur.execute(
                    q(f"SELECT DISTINCT key FROM kaos_mem_attribution WHERE {' AND '.join(where)}"),
                    tuple(params),
                )
                keys = [r[0] for r in cur.fetchall()]
            turns = digests = 0
            for key in keys:
                self._db.lock_key(cur, key)
                cur.execute(q("DELETE FROM kaos_mem_turns WHERE key = %s"), (key,))
                turns += max(cur.rowcount, 0)
                cur.execute(q("DELETE FROM kaos_mem_digests WHERE key = %s"), (key,))
                digests += max(cur.rowcount, 0)
                cur.execute(q("DELETE FROM kaos_mem_folds WHERE key = %s"), (key,))
                cur.execute(q("DELETE FROM kaos_mem_attribution WHERE key = %s"), (key,))
        return Erased(turns=turns, digests=digests)


# One schema for both dialects; only the column types that differ are named per dialect.
_SCHEMA_TEMPLATE = [
    """CREATE TABLE IF NOT EXISTS kaos_mem_turns (
        seq {identity},
        key TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        at TEXT NOT NULL,
        principal TEXT,
        agent TEXT,
        infer {boolean} NOT NULL,
        folded_by {bigint}
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
        id {identity},
        key TEXT NOT NULL,
        session TEXT NOT NULL,
        first_seq {bigint} NOT NULL,
        last_seq {bigint} NOT NULL,
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


def schema(*, identity: str, bigint: str, boolean: str) -> list[str]:
    """The conversational tiers' DDL with a dialect's identity, big-integer and boolean types."""
    return [
        s.replace("{identity}", identity).replace("{bigint}", bigint).replace("{boolean}", boolean)
        for s in _SCHEMA_TEMPLATE
    ]
