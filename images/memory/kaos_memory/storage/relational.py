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
- ``sessions``: one row per session with its last write, for the idle-session flush.
- ``leases``: who works on a session's digests or extractions, until when (see below).

The fold row is the outbox: it is written in the same transaction that evicts the turns,
with its digest and extraction pending, so work a replica had not finished when it died is
still recorded and any replica can pick it up. Work on one session's digests (and,
separately, its extractions) is held by a lease row with an expiry that the holder
renews; a crashed holder's lease lapses and another replica takes over. Finishing an
extraction is fenced by the lease: a holder that lost its lease cannot mark the fold done.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, TypeVar

from kaos_memory.compaction import needs_fold, select_fold
from kaos_memory.scope import Attribution
from kaos_memory.storage.base import (
    ActiveStats,
    Appended,
    Digest,
    Erased,
    ErasureSelector,
    Fold,
    FoldPolicy,
    IdleSession,
    LeaseKind,
    NewTurn,
    PendingSession,
    SessionBound,
    TurnRow,
)

T = TypeVar("T")

# Principal/agent "absent" in the attribution index: headers can never be empty, so the
# empty string cannot collide with a real value, and it keeps the primary key total.
NONE = ""

TURN_COLUMNS = "seq, role, content, tokens, at, principal, agent, infer"
# The outbox predicate; the partial index ``kaos_mem_folds_outbox`` has the same one.
OUTBOX = "(digest_status = 'pending' OR extraction_status = 'pending')"

ExtractionOutcome = Literal["done", "lost", "gone"]


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
        self, attribution: Attribution, turns: list[NewTurn], infer: bool, policy: FoldPolicy
    ) -> Appended:
        return await self._run(self._append_sync, attribution, turns, infer, policy)

    def _append_sync(
        self, attribution: Attribution, turns: list[NewTurn], infer: bool, policy: FoldPolicy
    ) -> Appended:
        q = self._db.q
        key = attribution.key
        at = now_iso()
        with self._db.transaction() as cur:
            # The session row first: it serialises writers of one session, and every
            # transaction that also takes the key's lock takes this row before it, so the
            # two locks are always taken in the same order (no deadlock with a flush).
            # The newest write wins even when an older transaction commits later.
            cur.execute(
                q(
                    "INSERT INTO kaos_mem_sessions (key, grp, session, last_at, flushed)"
                    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET"
                    " last_at = CASE WHEN excluded.last_at > kaos_mem_sessions.last_at"
                    " THEN excluded.last_at ELSE kaos_mem_sessions.last_at END,"
                    " flushed = excluded.flushed"
                ),
                (key, attribution.group, attribution.session, at, False),
            )
            # A session is one principal's conversation: once a principal wrote to it, a
            # write by anyone else (or by nobody) would both inject turns into that
            # principal's window and, through the attribution index, let the writer read it.
            cur.execute(
                q(
                    "SELECT DISTINCT principal FROM kaos_mem_attribution"
                    " WHERE key = %s AND principal <> %s"
                ),
                (key, NONE),
            )
            owners = {r[0] for r in cur.fetchall()}
            if owners and attribution.principal not in owners:
                raise SessionBound(key)
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
            stats = ActiveStats(tokens=int(tokens), events=int(events))
            fold_id = None
            if needs_fold(stats.tokens, stats.events, policy):
                # The eviction and its outbox entry commit with the write that caused them:
                # a crash after this answer cannot lose the fold's digest or extraction.
                fold_id = self._claim_in(cur, key, attribution.session, policy)
        return Appended(stats=stats, fold_id=fold_id)

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

    async def claim_fold(self, key: str, session: str, policy: FoldPolicy) -> Fold | None:
        return await self._run(self._claim_fold_sync, key, session, policy)

    def _claim_fold_sync(self, key: str, session: str, policy: FoldPolicy) -> Fold | None:
        with self._db.transaction() as cur:
            fold_id = self._claim_in(cur, key, session, policy)
            return None if fold_id is None else self._fold(cur, key, session, fold_id)

    def _claim_in(self, cur: Cursor, key: str, session: str, policy: FoldPolicy) -> int | None:
        """Under the key's lock, record the fold the policy asks for, if any; its id."""
        self._db.lock_key(cur, key)
        sizes = self._unfolded_sizes(cur, key)
        count = select_fold(sizes, policy)
        return self._insert_fold(cur, key, session, sizes[:count]) if count else None

    async def flush_session(self, key: str, session: str, idle_since: str) -> Fold | None:
        return await self._run(self._flush_session_sync, key, session, idle_since)

    def _flush_session_sync(self, key: str, session: str, idle_since: str) -> Fold | None:
        with self._db.transaction() as cur:
            # Session row, then key lock: the order every writer takes them in.
            cur.execute(
                self._db.q(
                    "UPDATE kaos_mem_sessions SET flushed = %s WHERE key = %s AND last_at <= %s"
                ),
                (True, key, idle_since),
            )
            if cur.rowcount < 1:
                return None  # erased, or written to since the sweep saw it idle
            self._db.lock_key(cur, key)
            sizes = self._unfolded_sizes(cur, key)
            if not sizes:
                return None
            return self._fold(cur, key, session, self._insert_fold(cur, key, session, sizes))

    def _unfolded_sizes(self, cur: Cursor, key: str) -> list[tuple[int, int]]:
        cur.execute(
            self._db.q(
                "SELECT seq, tokens FROM kaos_mem_turns WHERE key = %s AND folded_by IS NULL"
                " ORDER BY seq"
            ),
            (key,),
        )
        return [(int(s), int(t)) for s, t in cur.fetchall()]

    def _insert_fold(
        self, cur: Cursor, key: str, session: str, sizes: list[tuple[int, int]]
    ) -> int:
        """Record one fold of exactly the turns ``sizes`` names (the caller holds the key)."""
        q = self._db.q
        first_seq, last_seq = sizes[0][0], sizes[-1][0]
        cur.execute(
            q(
                "INSERT INTO kaos_mem_folds (key, session, first_seq, last_seq, turns,"
                " tokens, digest_status, extraction_status, extraction_attempts, failures,"
                " created_at) VALUES (%s, %s, %s, %s, %s, %s, 'pending', 'pending', 0, 0, %s)"
                " RETURNING id"
            ),
            (
                key,
                session,
                first_seq,
                last_seq,
                len(sizes),
                sum(t for _, t in sizes),
                now_iso(),
            ),
        )
        fold_id = int(cur.fetchone()[0])
        # By the seqs read under the lock, not a range: a turn whose transaction committed
        # late with a lower seq stays in the window for the next fold instead.
        for start in range(0, len(sizes), 500):
            chunk = [s for s, _ in sizes[start : start + 500]]
            marks = ", ".join("%s" for _ in chunk)
            cur.execute(
                q(
                    f"UPDATE kaos_mem_turns SET folded_by = %s WHERE key = %s"
                    f" AND folded_by IS NULL AND seq IN ({marks})"
                ),
                (fold_id, key, *chunk),
            )
        return fold_id

    def _fold(self, cur: Cursor, key: str, session: str, fold_id: int) -> Fold:
        return Fold(id=fold_id, key=key, session=session, turns=self._fold_turns(cur, fold_id))

    def _fold_turns(self, cur: Cursor, fold_id: int) -> list[TurnRow]:
        cur.execute(
            self._db.q(
                f"SELECT {TURN_COLUMNS} FROM kaos_mem_turns WHERE folded_by = %s ORDER BY seq"
            ),
            (fold_id,),
        )
        return [_turn(r) for r in cur.fetchall()]

    def _folds(self, cur: Cursor, key: str, where: str, limit: int) -> list[Fold]:
        cur.execute(
            self._db.q(
                f"SELECT id, session, extraction_attempts, retry_at FROM kaos_mem_folds"
                f" WHERE key = %s AND {where} ORDER BY id LIMIT %s"
            ),
            (key, limit),
        )
        heads = [(int(i), s, int(a), r) for i, s, a, r in cur.fetchall()]
        return [
            Fold(
                id=i,
                key=key,
                session=s,
                turns=self._fold_turns(cur, i),
                attempts=a,
                retry_at=None if r is None else float(r),
            )
            for i, s, a, r in heads
        ]

    async def pending_digest_folds(self, key: str) -> list[Fold]:
        return await self._run(self._pending_digest_folds_sync, key)

    def _pending_digest_folds_sync(self, key: str) -> list[Fold]:
        with self._db.transaction() as cur:
            return self._folds(cur, key, "digest_status = 'pending'", 1_000_000)

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
                        " AND digest_status = 'pending'"
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

    # --- extraction (fenced by the session's extract lease) --------------------------------

    async def next_extraction(self, key: str) -> Fold | None:
        return await self._run(self._next_extraction_sync, key)

    def _next_extraction_sync(self, key: str) -> Fold | None:
        with self._db.transaction() as cur:
            folds = self._folds(cur, key, "extraction_status = 'pending'", 1)
        return folds[0] if folds else None

    async def begin_extraction(self, fold: Fold, owner: str) -> int | None:
        return await self._run(self._begin_extraction_sync, fold, owner)

    def _begin_extraction_sync(self, fold: Fold, owner: str) -> int | None:
        """Count one more attempt at the fold's extraction; its number, or None when the
        lease is no longer ``owner``'s or the fold is no longer pending."""
        q = self._db.q
        with self._db.transaction() as cur:
            self._db.lock_key(cur, fold.key)
            if not self._holds(cur, fold.key, "extract", owner):
                return None
            cur.execute(
                q(
                    "UPDATE kaos_mem_folds SET extraction_attempts = extraction_attempts + 1"
                    " WHERE id = %s AND extraction_status = 'pending'"
                ),
                (fold.id,),
            )
            if cur.rowcount < 1:
                return None
            cur.execute(
                q("SELECT extraction_attempts FROM kaos_mem_folds WHERE id = %s"), (fold.id,)
            )
            return int(cur.fetchone()[0])

    async def finish_extraction(
        self, fold: Fold, owner: str, status: Literal["done", "failed"]
    ) -> ExtractionOutcome:
        return await self._run(self._finish_extraction_sync, fold, owner, status)

    def _finish_extraction_sync(
        self, fold: Fold, owner: str, status: Literal["done", "failed"]
    ) -> ExtractionOutcome:
        q = self._db.q
        with self._db.transaction() as cur:
            self._db.lock_key(cur, fold.key)
            cur.execute(q("SELECT 1 FROM kaos_mem_folds WHERE id = %s"), (fold.id,))
            if cur.fetchone() is None:
                return "gone"
            if not self._holds(cur, fold.key, "extract", owner):
                return "lost"
            cur.execute(
                q(
                    "UPDATE kaos_mem_folds SET extraction_status = %s, extracted_at = %s"
                    " WHERE id = %s AND extraction_status = 'pending'"
                ),
                (status, now_iso(), fold.id),
            )
            return "done" if cur.rowcount > 0 else "lost"

    async def defer(self, fold_ids: list[int], *, base: float, cap: float) -> float:
        return await self._run(self._defer_sync, fold_ids, base, cap)

    def _defer_sync(self, fold_ids: list[int], base: float, cap: float) -> float:
        """Count a failed job on each fold and keep the sweeper off it for a delay that
        doubles per failure (``base`` .. ``cap`` seconds); the longest delay set."""
        q = self._db.q
        now = time.time()
        longest = 0.0
        with self._db.transaction() as cur:
            for fold_id in fold_ids:
                cur.execute(q("SELECT failures FROM kaos_mem_folds WHERE id = %s"), (fold_id,))
                row = cur.fetchone()
                if row is None:
                    continue  # erased meanwhile
                failures = int(row[0]) + 1
                delay = min(base * 2 ** min(failures - 1, 30), cap)
                longest = max(longest, delay)
                cur.execute(
                    q("UPDATE kaos_mem_folds SET failures = %s, retry_at = %s WHERE id = %s"),
                    (failures, now + delay, fold_id),
                )
        return longest

    # --- leases -----------------------------------------------------------------------------

    def _holds(self, cur: Cursor, key: str, kind: LeaseKind, owner: str) -> bool:
        cur.execute(
            self._db.q("SELECT 1 FROM kaos_mem_leases WHERE key = %s AND kind = %s AND owner = %s"),
            (key, kind, owner),
        )
        return cur.fetchone() is not None

    async def acquire_lease(self, key: str, kind: LeaseKind, owner: str, ttl: float) -> bool:
        return await self._run(self._acquire_lease_sync, key, kind, owner, ttl)

    def _acquire_lease_sync(self, key: str, kind: LeaseKind, owner: str, ttl: float) -> bool:
        now = time.time()
        with self._db.transaction() as cur:
            cur.execute(
                self._db.q(
                    "INSERT INTO kaos_mem_leases (key, kind, owner, expires)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (key, kind) DO UPDATE SET"
                    " owner = excluded.owner, expires = excluded.expires"
                    " WHERE kaos_mem_leases.expires < %s OR kaos_mem_leases.owner = excluded.owner"
                ),
                (key, kind, owner, now + ttl, now),
            )
            return cur.rowcount > 0

    async def renew_lease(self, key: str, kind: LeaseKind, owner: str, ttl: float) -> bool:
        return await self._run(self._renew_lease_sync, key, kind, owner, ttl)

    def _renew_lease_sync(self, key: str, kind: LeaseKind, owner: str, ttl: float) -> bool:
        with self._db.transaction() as cur:
            cur.execute(
                self._db.q(
                    "UPDATE kaos_mem_leases SET expires = %s"
                    " WHERE key = %s AND kind = %s AND owner = %s"
                ),
                (time.time() + ttl, key, kind, owner),
            )
            return cur.rowcount > 0

    async def release_lease(self, key: str, kind: LeaseKind, owner: str) -> None:
        await self._run(self._release_lease_sync, key, kind, owner)

    def _release_lease_sync(self, key: str, kind: LeaseKind, owner: str) -> None:
        with self._db.transaction() as cur:
            cur.execute(
                self._db.q(
                    "DELETE FROM kaos_mem_leases WHERE key = %s AND kind = %s AND owner = %s"
                ),
                (key, kind, owner),
            )

    async def release_all_leases(self) -> int:
        """Drop every lease: only for a single-writer store whose previous process is gone."""
        return await self._run(self._release_all_leases_sync)

    def _release_all_leases_sync(self) -> int:
        with self._db.transaction() as cur:
            cur.execute("DELETE FROM kaos_mem_leases")
            return max(cur.rowcount, 0)

    # --- the sweeper's queries ----------------------------------------------------------------

    async def outbox(self, limit: int) -> list[PendingSession]:
        return await self._run(self._outbox_sync, limit)

    def _outbox_sync(self, limit: int) -> list[PendingSession]:
        """Sessions with pending fold work that is due and not leased, oldest work first."""
        now = time.time()
        with self._db.transaction() as cur:
            cur.execute(
                self._db.q(
                    f"SELECT f.key, MIN(f.session), MIN(f.id) FROM kaos_mem_folds f"
                    f" WHERE {OUTBOX} AND (f.retry_at IS NULL OR f.retry_at <= %s)"
                    f" AND NOT EXISTS (SELECT 1 FROM kaos_mem_leases l"
                    f" WHERE l.key = f.key AND l.expires >= %s)"
                    f" GROUP BY f.key ORDER BY MIN(f.id) LIMIT %s"
                ),
                (now, now, limit),
            )
            return [PendingSession(key=k, session=s) for k, s, _ in cur.fetchall()]

    async def outbox_depth(self) -> int:
        return await self._run(self._outbox_depth_sync)

    def _outbox_depth_sync(self) -> int:
        with self._db.transaction() as cur:
            cur.execute(f"SELECT COUNT(*) FROM kaos_mem_folds WHERE {OUTBOX}")
            return int(cur.fetchone()[0])

    async def idle_sessions(self, idle_since: str, limit: int) -> list[IdleSession]:
        return await self._run(self._idle_sessions_sync, idle_since, limit)

    def _idle_sessions_sync(self, idle_since: str, limit: int) -> list[IdleSession]:
        with self._db.transaction() as cur:
            cur.execute(
                self._db.q(
                    "SELECT key, session, last_at FROM kaos_mem_sessions"
                    " WHERE flushed = %s AND last_at <= %s ORDER BY last_at LIMIT %s"
                ),
                (False, idle_since, limit),
            )
            return [IdleSession(key=k, session=s, last_at=a) for k, s, a in cur.fetchall()]

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
                # Session row, then key lock: the order every writer takes them in.
                cur.execute(q("DELETE FROM kaos_mem_sessions WHERE key = %s"), (key,))
                self._db.lock_key(cur, key)
                cur.execute(q("DELETE FROM kaos_mem_turns WHERE key = %s"), (key,))
                turns += max(cur.rowcount, 0)
                cur.execute(q("DELETE FROM kaos_mem_digests WHERE key = %s"), (key,))
                digests += max(cur.rowcount, 0)
                cur.execute(q("DELETE FROM kaos_mem_folds WHERE key = %s"), (key,))
                cur.execute(q("DELETE FROM kaos_mem_attribution WHERE key = %s"), (key,))
                cur.execute(q("DELETE FROM kaos_mem_leases WHERE key = %s"), (key,))
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
        extraction_attempts INTEGER NOT NULL,
        failures INTEGER NOT NULL,
        retry_at {double},
        created_at TEXT NOT NULL,
        extracted_at TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS kaos_mem_folds_key ON kaos_mem_folds (key, digest_status)",
    f"CREATE INDEX IF NOT EXISTS kaos_mem_folds_outbox ON kaos_mem_folds (id) WHERE {OUTBOX}",
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
    """CREATE TABLE IF NOT EXISTS kaos_mem_sessions (
        key TEXT PRIMARY KEY,
        grp TEXT NOT NULL,
        session TEXT NOT NULL,
        last_at TEXT NOT NULL,
        flushed {boolean} NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS kaos_mem_sessions_idle ON kaos_mem_sessions (flushed, last_at)",
    """CREATE TABLE IF NOT EXISTS kaos_mem_leases (
        key TEXT NOT NULL,
        kind TEXT NOT NULL,
        owner TEXT NOT NULL,
        expires {double} NOT NULL,
        PRIMARY KEY (key, kind)
    )""",
]


def schema(*, identity: str, bigint: str, boolean: str, double: str) -> list[str]:
    """The conversational tiers' DDL with a dialect's identity, big-integer, boolean and
    floating-point types."""
    types = {"{identity}": identity, "{bigint}": bigint, "{boolean}": boolean, "{double}": double}
    out = []
    for stmt in _SCHEMA_TEMPLATE:
        for mark, sql_type in types.items():
            stmt = stmt.replace(mark, sql_type)
        out.append(stmt)
    return out
