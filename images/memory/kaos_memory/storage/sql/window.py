"""Writes and reads of a session's window and digests, and the sessions the sweeper watches.

A write inserts its turns and its attribution row in one transaction and, when the window
then crosses the fold trigger of the ``FoldPolicy`` it was handed, records the fold (the
outbox entry) in that same transaction: a crash after the answer cannot lose the fold.
"""

from __future__ import annotations

from kaos_memory.crypto.keyring import KeyGone
from kaos_memory.scope import Attribution
from kaos_memory.storage.base import (
    ActiveStats,
    Appended,
    ErasedSince,
    FoldPolicy,
    IdleSession,
    NewTurn,
    SessionBound,
    SessionRead,
)
from kaos_memory.storage.limits import WriteQuota
from kaos_memory.storage.sql import erasure, folds, retention
from kaos_memory.storage.sql.dialect import Statement, Tx
from kaos_memory.storage.sql.rows import (
    LATEST_DIGEST,
    TURN_COLUMNS,
    digest_row,
    latest_digest,
    turn_row,
)

__all__ = [
    "NONE",
    "append",
    "idle_sessions",
    "is_attributed",
    "latest_digest",
    "session_owner",
    "session_read",
    "session_statements",
]

# Principal/agent "absent" in the attribution index: headers can never be empty, so the
# empty string cannot collide with a real value, and it keeps the primary key total.
NONE = ""


_INSERT_TURN = (
    "INSERT INTO kaos_mem_turns"
    " (key, role, content, tokens, at, principal, agent, infer, rid, source)"
    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
_STATS = (
    "SELECT COALESCE(SUM(tokens), 0), COUNT(*) FROM kaos_mem_turns"
    " WHERE key = %s AND folded_by IS NULL"
)
# The window's size, and whether the key a sealed write used still has its row.
_STATS_SEALED = (
    "SELECT COALESCE(SUM(tokens), 0), COUNT(*),"
    " EXISTS (SELECT 1 FROM kaos_mem_keys WHERE id = %s) FROM kaos_mem_turns"
    " WHERE key = %s AND folded_by IS NULL"
)


def append(
    tx: Tx,
    attribution: Attribution,
    turns: list[NewTurn],
    infer: bool,
    policy: FoldPolicy,
    quota: WriteQuota | None = None,
    key_id: str | None = None,
    said_at: float | None = None,
) -> Appended:
    """Write ``turns`` (sealed under the key ``key_id`` names, or in the clear for None);
    ``ErasedSince`` when the conversation was erased after ``said_at``."""
    if quota is not None:
        # Before anything is written: a refused write rolls back with nothing in it.
        retention.check_quota(tx, attribution, turns, quota)
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
    # After the session row: an erasure of this session that commits later waits for this
    # write and deletes its turns; one that committed earlier is seen here.
    if said_at is not None and erasure.erased_since(tx, attribution, said_at):
        raise ErasedSince(key)
    # A session is one principal's conversation, and its key names that principal
    # (``conversation_key``): another principal's write of the same id goes to a key of
    # its own. A shared-form key a principal wrote to (one of several principals, which
    # ``rekey`` leaves in place) stays closed to anyone else's write, which would inject
    # turns into that principal's window and, through the attribution index, read it.
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
    principal, agent = attribution.principal, attribution.agent
    for turn in turns:
        tx.execute(
            _INSERT_TURN,
            (
                key,
                turn.role,
                turn.content,
                turn.tokens,
                at,
                principal,
                agent,
                infer,
                turn.rid,
                turn.source,
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
    if key_id is None:
        tokens, events = tx.one(_STATS, (key,))
    else:
        # Sealed turns are kept only while their key's row exists: when a forget (on any
        # replica) deleted it, the owner's key is shredded and the whole write rolls back
        # (``KeyGone``: the writer seals again under the owner's new key). One check per
        # write, after every insert, is as strict as one per turn: under SQLite's BEGIN
        # IMMEDIATE no other writer commits inside this transaction, so every check in it
        # sees the same rows; under PostgreSQL's READ COMMITTED a statement sees what
        # committed before it began, so this one, after the last insert, sees every
        # forget a check beside any insert would have seen.
        tokens, events, key_found = tx.one(_STATS_SEALED, (key_id, key))
        if not key_found:
            raise KeyGone(key_id)
    stats = ActiveStats(tokens=int(tokens), events=int(events))
    fold_id = None
    if policy.crossed(stats.tokens, stats.events):
        fold_id = folds.claim_in(tx, key, attribution.session, policy, wait=False)
    return Appended(stats=stats, fold_id=fold_id)


_WINDOW = (
    f"SELECT {TURN_COLUMNS} FROM kaos_mem_turns"
    " WHERE key = %s AND folded_by IS NULL ORDER BY seq DESC LIMIT %s"
)
_ATTRIBUTED = "SELECT 1 FROM kaos_mem_attribution WHERE key = %s AND principal = %s LIMIT 1"


def is_attributed(tx: Tx, key: str, principal: str) -> bool:
    return tx.one(_ATTRIBUTED, (key, principal)) is not None


def session_statements(
    key: str, principal: str | None, limit: int, *, turns: bool, digest: bool
) -> list[Statement]:
    """A recall's reads of a session, for ``Dialect.read`` (sent together, so the store
    is waited on once): the principal-bound check when ``principal`` is set, the newest
    ``limit`` unfolded turns if ``turns``, the latest digest if ``digest``. Nothing in
    one depends on another's answer; ``session_read`` decides."""
    statements: list[Statement] = []
    if principal is not None:
        statements.append((_ATTRIBUTED, (key, principal)))
    if turns:
        statements.append((_WINDOW, (key, limit)))
    if digest:
        statements.append((LATEST_DIGEST, (key,)))
    return statements


def session_read(
    results: list[list[tuple[object, ...]]], principal: str | None, *, turns: bool, digest: bool
) -> SessionRead:
    """The ``SessionRead`` of ``session_statements``' results (same arguments): empty
    when the principal never wrote to the session, whatever the other reads found."""
    rows = iter(results)
    if principal is not None and not next(rows):
        return SessionRead(turns=[], digest=None)
    window = [turn_row(r) for r in next(rows)] if turns else []
    latest = next(rows) if digest else []
    return SessionRead(turns=window, digest=digest_row(latest[0] if latest else None))


def session_owner(tx: Tx, key: str) -> tuple[str | None, str | None]:
    """Whose the session's digest is: its principal if it has one, else an agent's."""
    rows = tx.all("SELECT principal, agent FROM kaos_mem_attribution WHERE key = %s", (key,))
    for principal, agent in sorted(rows, key=lambda r: (r[0] == NONE, r[1] == NONE, r)):
        return (principal or None, agent or None)
    return (None, None)


def idle_sessions(tx: Tx, idle_since: str, limit: int) -> list[IdleSession]:
    rows = tx.all(
        "SELECT key, session, last_at FROM kaos_mem_sessions"
        " WHERE flushed = %s AND last_at <= %s ORDER BY last_at LIMIT %s",
        (False, idle_since, limit),
    )
    return [IdleSession(key=k, session=s, last_at=a) for k, s, a in rows]
