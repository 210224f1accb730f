"""Who a request erases (exports, imports) as, and the audit listing's wire form.

The actor of a forget is what the edge verified: the admin user a SubjectAccessReview
allowed (``kaos_memory.admin`` sets it on the request), else the agent of the identity
(verified from its token under ``KAOS_MEMORY_AUTH_MODE``, else the header as sent), else,
on the trusted-header path, an unnamed and unverified admin.
"""

from __future__ import annotations

import dataclasses
import logging

from aiohttp import web
from kaos_core.memory.contract import (
    AuditActor,
    AuditRecord,
    AuditScope,
    ErasureReceipt,
    Forgotten,
    Moved,
)
from kaos_core.wire import Identity

from kaos_memory.clock import iso
from kaos_memory.storage.audit import Actor, AuditEntry, AuditLog, Transfer, TransferOutcome
from kaos_memory.storage.audit import Moved as MovedRecords
from kaos_memory.storage.errors import StorageError

audit_log = logging.getLogger("kaos_memory.audit")
log = logging.getLogger(__name__)

# The request key under which the admin path leaves its verified user.
ACTOR_KEY = "kaos_memory_actor"


def actor_of(request: web.Request, identity: Identity, *, verified: bool) -> Actor:
    """Who the request acts as; ``verified``: the service checks identities (auth on)."""
    admin = request.get(ACTOR_KEY)
    if isinstance(admin, Actor):
        return admin
    if identity.agent is not None:
        return Actor(kind="agent", name=identity.agent, verified=verified)
    return Actor(kind="admin", name=None, verified=False)


def wire_record(entry: AuditEntry) -> AuditRecord:
    forget = entry.action == "forget"
    return AuditRecord(
        id=entry.id,
        at=iso(entry.at),
        action=entry.action,
        actor=AuditActor(
            kind=entry.actor.kind, name=entry.actor.name, verified=entry.actor.verified
        ),
        scope=AuditScope(
            level=entry.level,  # type: ignore[arg-type]
            principal=entry.principal,
            agent=entry.agent,
            session=entry.session,
        ),
        # A transfer's per-tier columns hold what it moved, never anything forgotten.
        forgotten=Forgotten(
            short_term=entry.short_term, medium_term=entry.medium_term, long_term=entry.long_term
        )
        if forget
        else Forgotten(),
        final=entry.final,
        signed_receipt=(
            None if entry.receipt is None else ErasureReceipt.model_validate_json(entry.receipt)
        ),
        outcome=entry.outcome,
        moved=None
        if forget
        else Moved(
            turns=entry.short_term,
            digests=entry.medium_term,
            facts=entry.long_term,
            skipped=entry.skipped,
        ),
        source=entry.source,
    )


async def transfer_ended(
    audit: AuditLog,
    store: str,
    audit_id: int,
    transfer: Transfer,
    outcome: TransferOutcome,
    moved: MovedRecords,
) -> None:
    """Record how a transfer (an export, an import, a quarantine change) ended: on its
    audit record, and as an audit log line, which still says it when the record fails."""
    try:
        await audit.update_transfer(audit_id, outcome, moved)
    except StorageError:
        # The record stays ``started``: the log line below still says how it ended.
        log.error("recording the end of %s %d failed", transfer.action, audit_id, exc_info=True)
    actor = transfer.actor
    audit_log.info(
        "memory %s %s",
        transfer.action,
        outcome,
        extra={
            "action": transfer.action,
            "outcome": outcome,
            "audit": audit_id,
            "actor": actor.name,
            "actor_kind": actor.kind,
            "verified": actor.verified,
            "scope": {
                "level": transfer.level,
                "principal": transfer.principal,
                "agent": transfer.agent,
                "source": transfer.source,
            },
            "records": dataclasses.asdict(moved),
            "store": store,
        },
    )
