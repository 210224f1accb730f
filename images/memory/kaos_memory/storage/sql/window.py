"""Writes and reads of a session's window and digests, and the sessions the sweeper watches.

A write inserts its turns and its attribution row in one transaction and, when the window
then crosses the fold trigger of the ``FoldPolicy`` it was handed, records the fold (the
outbox entry) in that same transaction: a crash after the answer cannot lose the fold.
"""

from __future__ import annotations

from kaos_memory.scope import Attribution
from kaos_memory.storage.base import (
    ActiveStats,
    Appended,
    FoldPolicy,
    IdleSession,
    NewTurn,
    SessionBound,
    SessionRead,
    TurnRow,
)
from kaos_memory.storage.sql import folds
from kaos_memory.storage.sql.dialect import Tx
from kaos_memory.storage.sql.rows import TURN_COLUMNS, latest_digest, turn_row

__all__ = [
    "NONE",
    "append",
    "idle_sessions",
    "is_attributed",
    "latest_digest",
    "read_session",
    "window_rows",
]

# Principal/agent "absent" in the attribution index: headers can never be empty, so the
# empty string cannot collide with a real value, and it keeps the primary key total.
NONE = ""


def append(
    tx: Tx, attribution: Attribution, turns: list[NewTurn], infer: bool, policy: FoldPolicy
) -> Appended:
    key = attribution.key
    at = tx.now_iso
    # The session row first: it serialises writers of one session, and every transaction
    # that also takes the key's lock takes this row before it, so the two locks are always
    # taken in the same order (no deadlock with a flush). The newest write wins even when
    # an older transaction commits later.
    tx.execute(
        "INSERT INTO kaos_mem_sessions (key, grp, session, last_at, flushed)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET"
        " last_at = CASE WHEN excluded.last_at > kaos_mem_sessions.last_at"
        " THEN excluded.last_at ELSE kaos_mem_sessions.last_at END,"
        " flushed = excluded.flushed",
        (key, attribution.group, attribution.session, at, False),
    )
    # A session is one principal's conversation: once a principal wrote to it, a write by
    # anyone else (or by nobody) would both inject turns into that principal's window and,
    # through the attribution index, let the writer read it.
    owners = {
        r[0]
        for r in tx.all(
            "SELECT DISTINCT principal FROM kaos_mem_attribution"
            " WHERE key = %s AND principal <> %s",
            (key, NONE),
        )
    }
    if owners and attribution.principal not in owners:
        raise SessionBound(key)
    for turn in turns:
        tx.execute(
            "INSERT INTO kaos_mem_turns (key, role, content, tokens, at, principal, agent,"
            " infer) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
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
    tx.execute(
        "INSERT INTO kaos_mem_attribution (key, grp, session, principal, agent)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (
            key,
            attribution.group,
            attribution.session,
            attribution.principal or NONE,
            attribution.agent or NONE,
        ),
    )
    tokens, events = tx.one(
        "SELECT COALESCE(SUM(tokens), 0), COUNT(*) FROM kaos_mem_turns"
        " WHERE key = %s AND folded_by IS NULL",
        (key,),
    )
    stats = ActiveStats(tokens=int(tokens), events=int(events))
    fold_id = None
    if policy.crossed(stats.tokens, stats.events):
        fold_id = folds.claim_in(tx, key, attribution.session, policy, wait=False)
    return Appended(stats=stats, fold_id=fold_id)


def window_rows(tx: Tx, key: str, limit: int) -> list[TurnRow]:
    rows = tx.all(
        f"SELECT {TURN_COLUMNS} FROM kaos_mem_turns"
        " WHERE key = %s AND folded_by IS NULL ORDER BY seq DESC LIMIT %s",
        (key, limit),
    )
    return [turn_row(r) for r in rows]


def is_attributed(tx: Tx, key: str, principal: str) -> bool:
    row = tx.one(
        "SELECT 1 FROM kaos_mem_attribution WHERE key = %s AND principal = %s LIMIT 1",
        (key, principal),
    )
    return row is not None


def read_session(
    tx: Tx, key: str, principal: str | None, limit: int, *, turns: bool, digest: bool
) -> SessionRead:
    if principal is not None and not is_attributed(tx, key, principal):
        return SessionRead(turns=[], digest=None)
    return SessionRead(
        turns=window_rows(tx, key, limit) if turns else [],
        digest=latest_digest(tx, key) if digest else None,
    )


def idle_sessions(tx: Tx, idle_since: str, limit: int) -> list[IdleSession]:
    rows = tx.all(
        "SELECT key, session, last_at FROM kaos_mem_sessions"
        " WHERE flushed = %s AND last_at <= %s ORDER BY last_at LIMIT %s",
        (False, idle_since, limit),
    )
    return [IdleSession(key=k, session=s, last_at=a) for k, s, a in rows]
