"""The audit table (``kaos_mem_audit``): an erasure's row written beside its tombstone, an
export's or import's when it starts and again when it ends; listed newest first. See
``storage.audit`` for what a record holds (and never holds)."""

from __future__ import annotations

from typing import Any

from kaos_memory.scope import Scope
from kaos_memory.storage.audit import (
    Actor,
    AuditAction,
    AuditEntry,
    Moved,
    Transfer,
    TransferOutcome,
)
from kaos_memory.storage.sql.dialect import Tx

# A transfer's ``erasure_id``: no erasure has it (their ids start at 1), so neither the
# tombstone join nor ``add_long_term`` ever reaches a transfer's row.
NO_ERASURE = 0


def record(
    tx: Tx, erasure_id: int, scope: Scope, actor: Actor, short_term: int, medium_term: int
) -> int:
    """The audit record of erasure ``erasure_id`` (in its transaction); its id."""
    row = tx.one(
        "INSERT INTO kaos_mem_audit (erasure_id, grp, at, actor_kind, actor, verified, level,"
        " principal, agent, session, short_term, medium_term, long_term)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 0) RETURNING id",
        (
            erasure_id,
            scope.group,
            tx.now,
            actor.kind,
            actor.name,
            actor.verified,
            scope.level,
            scope.principal,
            scope.agent,
            scope.session,
            short_term,
            medium_term,
        ),
    )
    return int(row[0])


def add_long_term(tx: Tx, erasure_id: int, facts: int) -> None:
    """Count the facts an erasure deleted (a resumed erasure adds what it found)."""
    tx.execute(
        "UPDATE kaos_mem_audit SET long_term = long_term + %s"
        " WHERE erasure_id = %s AND action = 'forget'",
        (facts, erasure_id),
    )


def record_transfer(tx: Tx, group: str, transfer: Transfer) -> int:
    """The ``started`` record of an export or import; its id."""
    actor = transfer.actor
    row = tx.one(
        "INSERT INTO kaos_mem_audit (erasure_id, grp, at, actor_kind, actor, verified, level,"
        " principal, agent, session, short_term, medium_term, long_term, action, outcome,"
        " skipped, source)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, NULL, 0, 0, 0, %s, 'started', 0, %s)"
        " RETURNING id",
        (
            NO_ERASURE,
            group,
            tx.now,
            actor.kind,
            actor.name,
            actor.verified,
            transfer.level,
            transfer.principal,
            transfer.agent,
            transfer.action,
            transfer.source,
        ),
    )
    return int(row[0])


def update_transfer(tx: Tx, audit_id: int, outcome: TransferOutcome, moved: Moved) -> None:
    """How transfer ``audit_id`` ended and what it moved (a forget's record is never
    touched)."""
    tx.execute(
        "UPDATE kaos_mem_audit SET outcome = %s, short_term = %s, medium_term = %s,"
        " long_term = %s, skipped = %s WHERE id = %s AND action <> 'forget'",
        (outcome, moved.turns, moved.digests, moved.facts, moved.skipped, audit_id),
    )


def add_receipt(tx: Tx, audit_id: int, receipt: str) -> None:
    """Keep the signed receipt the forget answered with on its audit record."""
    tx.execute("UPDATE kaos_mem_audit SET receipt = %s WHERE id = %s", (receipt, audit_id))


def entries(
    tx: Tx, group: str, limit: int, before: int | None, action: AuditAction | None = None
) -> list[AuditEntry]:
    """Up to ``limit`` records of ``group`` (of ``action`` only, when given), newest first,
    with ids below ``before``."""
    where: list[str] = ["a.grp = %s"]
    params: list[object] = [group]
    if before is not None:
        where.append("a.id < %s")
        params.append(before)
    if action is not None:
        where.append("a.action = %s")
        params.append(action)
    rows = tx.all(
        "SELECT a.id, a.erasure_id, a.at, a.actor_kind, a.actor, a.verified, a.level,"
        " a.principal, a.agent, a.session, a.short_term, a.medium_term, a.long_term,"
        " e.done_at, a.receipt, a.action, a.outcome, a.skipped, a.source"
        " FROM kaos_mem_audit a LEFT JOIN kaos_mem_erasures e ON e.id = a.erasure_id"
        f" WHERE {' AND '.join(where)} ORDER BY a.id DESC LIMIT %s",
        (*params, limit),
    )
    return [_entry(r) for r in rows]


def _entry(r: Any) -> AuditEntry:
    action, outcome = r[15], r[16]
    # A forget is final once its tombstone is; a transfer once it completed.
    final = r[13] is not None if action == "forget" else outcome == "complete"
    return AuditEntry(
        id=int(r[0]),
        erasure_id=int(r[1]),
        at=float(r[2]),
        actor=Actor(kind=r[3], name=r[4], verified=bool(r[5])),
        level=r[6],
        principal=r[7],
        agent=r[8],
        session=r[9],
        short_term=int(r[10]),
        medium_term=int(r[11]),
        long_term=int(r[12]),
        final=final,
        receipt=r[14],
        action=action,
        outcome=outcome,
        skipped=int(r[17]),
        source=r[18],
    )
