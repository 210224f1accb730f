"""The outbox: fold rows, their digest and extraction status, and the back-off of failures.

The fold row is the outbox entry: it is written in the same transaction that evicts the
turns, with its digest and extraction pending, so work a replica had not finished when it
died is still recorded and any replica can pick it up. Starting and finishing an
extraction is fenced by the session's ``extract`` lease (``leases.holds``): a holder that
lost its lease cannot mark the fold done.

A pending erasure (a tombstone not yet final, ``erasure.PENDING``) covers every fold of
the sessions it reached: while it is pending no fold of them is handed out, begun or
digested, and the sweeper does not pick them up, so no model call starts on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from kaos_core.backoff import capped_backoff
from kaos_core.telemetry import current_traceparent

from kaos_memory.storage.base import ExtractionStatus, Fold, FoldPolicy, PendingSession, TurnRow
from kaos_memory.storage.sql.dialect import Tx
from kaos_memory.storage.sql.erasure import PENDING
from kaos_memory.storage.sql.leases import holds
from kaos_memory.storage.sql.rows import TURN_COLUMNS, latest_digest, turn_row
from kaos_memory.storage.sql.schema import OUTBOX

ExtractionOutcome = Literal["done", "lost", "gone"]

# Turns marked folded per statement (bounded parameter lists on both drivers).
_MARK_CHUNK = 500


# --- recording folds ------------------------------------------------------------------------


def claim_in(
    tx: Tx, key: str, session: str, policy: FoldPolicy, *, wait: bool = True
) -> int | None:
    """Under the key's lock, record the fold the policy asks for, if any; its id.

    ``wait=False`` (a write) does not queue behind background work holding the key (a
    digest or extraction step of the same session, several round trips long): it
    records no fold then, and the session's next write, or its idle flush, does. The
    window itself is computed on read, so it stays within its budget meanwhile.
    """
    if not wait:
        if not tx.try_lock_key(key):
            return None
    else:
        tx.lock_key(key)
    sizes = _unfolded_sizes(tx, key)
    count = policy.select(sizes)
    return _insert_fold(tx, key, session, sizes[:count]) if count else None


def claim_fold(tx: Tx, key: str, session: str, policy: FoldPolicy) -> Fold | None:
    fold_id = claim_in(tx, key, session, policy)
    return None if fold_id is None else _fold(tx, key, session, fold_id)


def flush_session(tx: Tx, key: str, session: str, idle_since: str) -> Fold | None:
    # Session row, then key lock: the order every writer takes them in.
    cur = tx.execute(
        "UPDATE kaos_mem_sessions SET flushed = %s WHERE key = %s AND last_at <= %s",
        (True, key, idle_since),
    )
    if cur.rowcount < 1:
        return None  # erased, or written to since the sweep saw it idle
    tx.lock_key(key)
    sizes = _unfolded_sizes(tx, key)
    if not sizes:
        return None
    return _fold(tx, key, session, _insert_fold(tx, key, session, sizes))


def _unfolded_sizes(tx: Tx, key: str) -> list[tuple[int, int]]:
    rows = tx.all(
        "SELECT seq, tokens FROM kaos_mem_turns WHERE key = %s AND folded_by IS NULL ORDER BY seq",
        (key,),
    )
    return [(int(s), int(t)) for s, t in rows]


def _insert_fold(tx: Tx, key: str, session: str, sizes: list[tuple[int, int]]) -> int:
    """Record one fold of exactly the turns ``sizes`` names (the caller holds the key)."""
    first_seq, last_seq = sizes[0][0], sizes[-1][0]
    # The active span (the write's, carried into this thread by the store) goes with the
    # outbox entry, so the work on it links back to the write on any replica.
    row = tx.one(
        "INSERT INTO kaos_mem_folds (key, session, first_seq, last_seq, turns, tokens,"
        " digest_status, extraction_status, extraction_attempts, failures, created_at,"
        " trace_context)"
        " VALUES (%s, %s, %s, %s, %s, %s, 'pending', 'pending', 0, 0, %s, %s) RETURNING id",
        (
            key,
            session,
            first_seq,
            last_seq,
            len(sizes),
            sum(t for _, t in sizes),
            tx.now_iso,
            current_traceparent(),
        ),
    )
    fold_id = int(row[0])
    # By the seqs read under the lock, not a range: a turn whose transaction committed
    # late with a lower seq stays in the window for the next fold instead.
    for start in range(0, len(sizes), _MARK_CHUNK):
        chunk = [s for s, _ in sizes[start : start + _MARK_CHUNK]]
        marks = ", ".join("%s" for _ in chunk)
        tx.execute(
            f"UPDATE kaos_mem_turns SET folded_by = %s WHERE key = %s"
            f" AND folded_by IS NULL AND seq IN ({marks})",
            (fold_id, key, *chunk),
        )
    return fold_id


# --- reading folds --------------------------------------------------------------------------


def _fold(tx: Tx, key: str, session: str, fold_id: int) -> Fold:
    row = tx.one("SELECT trace_context FROM kaos_mem_folds WHERE id = %s", (fold_id,))
    return Fold(
        id=fold_id,
        key=key,
        session=session,
        turns=_fold_turns(tx, fold_id),
        trace_context=None if row is None else row[0],
    )


def _fold_turns(tx: Tx, fold_id: int) -> list[TurnRow]:
    rows = tx.all(
        f"SELECT {TURN_COLUMNS} FROM kaos_mem_turns WHERE folded_by = %s ORDER BY seq",
        (fold_id,),
    )
    return [turn_row(r) for r in rows]


def _folds(tx: Tx, key: str, where: str, limit: int) -> list[Fold]:
    rows = tx.all(
        f"SELECT id, session, extraction_attempts, retry_at, trace_context FROM kaos_mem_folds"
        f" WHERE key = %s AND {where} AND NOT {PENDING.format(key='%s')} ORDER BY id LIMIT %s",
        (key, key, limit),
    )
    heads = [(int(i), s, int(a), r, tc) for i, s, a, r, tc in rows]
    return [
        Fold(
            id=i,
            key=key,
            session=s,
            turns=_fold_turns(tx, i),
            attempts=a,
            retry_at=None if r is None else float(r),
            trace_context=tc,
        )
        for i, s, a, r, tc in heads
    ]


def pending_digest_folds(tx: Tx, key: str) -> list[Fold]:
    return _folds(tx, key, "digest_status = 'pending'", 1_000_000)


def next_extraction(tx: Tx, key: str) -> Fold | None:
    found = _folds(tx, key, "extraction_status = 'pending'", 1)
    return found[0] if found else None


# --- digests --------------------------------------------------------------------------------


def add_digest(
    tx: Tx, key: str, summary: str | Callable[[int], str], fold_ids: list[int], retention: int
) -> int | None:
    """Append a digest version (``summary``, or what it gives for the version: sealed to
    the row), unless the folds are gone or digested; prune beyond ``retention``."""
    tx.lock_key(key)
    if _erasing(tx, key):
        return None
    pending = 0
    for fold_id in fold_ids:
        row = tx.one(
            "SELECT 1 FROM kaos_mem_folds WHERE id = %s AND key = %s AND digest_status = 'pending'",
            (fold_id, key),
        )
        pending += row is not None
    if pending != len(fold_ids) or not fold_ids:
        return None
    latest = latest_digest(tx, key)
    version = 1 if latest is None else latest.version + 1
    tx.execute(
        "INSERT INTO kaos_mem_digests (key, version, summary, created_at) VALUES (%s, %s, %s, %s)",
        (key, version, summary if isinstance(summary, str) else summary(version), tx.now_iso),
    )
    for fold_id in fold_ids:
        tx.execute(
            "UPDATE kaos_mem_folds SET digest_status = 'done', digest_version = %s WHERE id = %s",
            (version, fold_id),
        )
    tx.execute(
        "DELETE FROM kaos_mem_digests WHERE key = %s AND version <= %s",
        (key, version - retention),
    )
    return version


# --- extraction (fenced by the session's extract lease) -------------------------------------


def _erasing(tx: Tx, key: str) -> bool:
    """Whether a pending erasure covers the session (its tombstone check)."""
    return tx.one(f"SELECT 1 WHERE {PENDING.format(key='%s')}", (key,)) is not None


def begin_extraction(tx: Tx, fold: Fold, owner: str) -> int | None:
    """Count one more attempt at the fold's extraction; its number, or None when the lease
    is no longer ``owner``'s or the fold is no longer pending."""
    tx.lock_key(fold.key)
    if not holds(tx, fold.key, "extract", owner) or _erasing(tx, fold.key):
        return None
    cur = tx.execute(
        "UPDATE kaos_mem_folds SET extraction_attempts = extraction_attempts + 1"
        " WHERE id = %s AND extraction_status = 'pending'",
        (fold.id,),
    )
    if cur.rowcount < 1:
        return None
    row = tx.one("SELECT extraction_attempts FROM kaos_mem_folds WHERE id = %s", (fold.id,))
    return int(row[0])


def finish_extraction(
    tx: Tx, fold: Fold, owner: str, status: ExtractionStatus
) -> ExtractionOutcome:
    tx.lock_key(fold.key)
    if tx.one("SELECT 1 FROM kaos_mem_folds WHERE id = %s", (fold.id,)) is None:
        return "gone"
    if not holds(tx, fold.key, "extract", owner):
        return "lost"
    cur = tx.execute(
        "UPDATE kaos_mem_folds SET extraction_status = %s, extracted_at = %s"
        " WHERE id = %s AND extraction_status = 'pending'",
        (status, tx.now_iso, fold.id),
    )
    return "done" if cur.rowcount > 0 else "lost"


def defer(tx: Tx, fold_ids: list[int], base: float, cap: float) -> float:
    """Count a failed job on each fold and keep the sweeper off it for a delay that doubles
    per failure (``base`` .. ``cap`` seconds); the longest delay set."""
    longest = 0.0
    for fold_id in fold_ids:
        row = tx.one("SELECT failures FROM kaos_mem_folds WHERE id = %s", (fold_id,))
        if row is None:
            continue  # erased meanwhile
        failures = int(row[0]) + 1
        delay = capped_backoff(failures - 1, base=base, cap=cap)
        longest = max(longest, delay)
        tx.execute(
            "UPDATE kaos_mem_folds SET failures = %s, retry_at = %s WHERE id = %s",
            (failures, tx.now + delay, fold_id),
        )
    return longest


# --- the sweeper's queries ------------------------------------------------------------------


def outbox(tx: Tx, limit: int) -> list[PendingSession]:
    """Sessions with pending fold work that is due and not leased, oldest work first."""
    rows = tx.all(
        f"SELECT f.key, MIN(f.session), MIN(f.id) FROM kaos_mem_folds f"
        f" WHERE {OUTBOX} AND (f.retry_at IS NULL OR f.retry_at <= %s)"
        f" AND NOT EXISTS (SELECT 1 FROM kaos_mem_leases l"
        f" WHERE l.key = f.key AND l.expires >= %s) AND NOT {PENDING.format(key='f.key')}"
        f" GROUP BY f.key ORDER BY MIN(f.id) LIMIT %s",
        (tx.now, tx.now, limit),
    )
    return [PendingSession(key=k, session=s) for k, s, _ in rows]


def outbox_depth(tx: Tx) -> int:
    return int(tx.one(f"SELECT COUNT(*) FROM kaos_mem_folds WHERE {OUTBOX}")[0])
