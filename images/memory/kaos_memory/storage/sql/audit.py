"""The erasure audit table (``kaos_mem_audit``): written beside the tombstone, listed newest
first. See ``storage.audit`` for what a record holds (and never holds)."""

from __future__ import annotations

from kaos_memory.scope import Scope
from kaos_memory.storage.audit import Actor, AuditEntry
from kaos_memory.storage.sql.dialect import Tx


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
        "UPDATE kaos_mem_audit SET long_term = long_term + %s WHERE erasure_id = %s",
        (facts, erasure_id),
    )


def add_receipt(tx: Tx, audit_id: int, receipt: str) -> None:
    """Keep the signed receipt the forget answered with on its audit record."""
    tx.execute("UPDATE kaos_mem_audit SET receipt = %s WHERE id = %s", (receipt, audit_id))


def entries(tx: Tx, group: str, limit: int, before: int | None) -> list[AuditEntry]:
    """Up to ``limit`` records of ``group``, newest first, with ids below ``before``."""
    where: list[str] = ["a.grp = %s"]
    params: list[object] = [group]
    if before is not None:
        where.append("a.id < %s")
        params.append(before)
    rows = tx.all(
        "SELECT a.id, a.erasure_id, a.at, a.actor_kind, a.actor, a.verified, a.level,"
        " a.principal, a.agent, a.session, a.short_term, a.medium_term, a.long_term,"
        " e.done_at, a.receipt"
        " FROM kaos_mem_audit a LEFT JOIN kaos_mem_erasures e ON e.id = a.erasure_id"
        f" WHERE {' AND '.join(where)} ORDER BY a.id DESC LIMIT %s",
        (*params, limit),
    )
    return [
        AuditEntry(
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
            final=r[13] is not None,
            receipt=r[14],
        )
        for r in rows
    ]
