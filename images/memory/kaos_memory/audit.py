"""Who a request erases (exports, imports) as, and the audit listing's wire form.

The actor of a forget is what the edge verified: the admin user a SubjectAccessReview
allowed (``kaos_memory.admin`` sets it on the request), else the agent of the identity
(verified from its token under ``KAOS_MEMORY_AUTH_MODE``, else the header as sent), else,
on the trusted-header path, an unnamed and unverified admin.
"""

from __future__ import annotations

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
from kaos_memory.storage.audit import Actor, AuditEntry

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
