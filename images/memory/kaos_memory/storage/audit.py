"""The audit's rows: who erased, exported or imported which scope, when, and how much.

Every erasure (by an agent for its user, or by an administrator) is recorded in the same
transaction as its tombstone (``storage.sql.erasure``), so an erasure that happened has
its record; the long-term count is added once the facts are gone (also when a sweeper
finishes the erasure of a replica that died). An export or import is recorded ``started``
before its first record moves (``portable.http`` refuses one it cannot record) and
updated with how it ended and what it moved. A record names identities and counts, never
content: no turn, digest or fact text is copied into it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

# ``retention``: the service itself, erasing what the store's retention says is past its age.
ActorKind = Literal["agent", "admin", "unknown", "retention"]


@dataclass(frozen=True)
class Actor:
    """Who asks for an erasure: an agent (its identity) or an administrator (the
    Kubernetes user name; ``None`` on the trusted-header path, which has no user), and
    whether the service verified it."""

    kind: ActorKind
    name: str | None = None
    verified: bool = False


UNKNOWN_ACTOR = Actor(kind="unknown")

AuditAction = Literal["forget", "export", "import", "quarantine_release", "quarantine_erase"]
# Recorded as a transfer: started, then ended with what it moved (a quarantine release or
# erasure counts its facts; ``kaos_memory.quarantine``).
TransferAction = Literal["export", "import", "quarantine_release", "quarantine_erase"]
# ``started``: recorded, not yet ended (or its replica died on the way); ``incomplete``: an
# export's stream broke off after it began; ``failed``: refused or failed before the end.
TransferOutcome = Literal["started", "complete", "incomplete", "failed"]


@dataclass(frozen=True)
class Transfer:
    """An export, import, or quarantine release or erasure to record: who asked, over which
    scope (an import's is the store: its file says whose records it holds), and an import's
    source format."""

    action: TransferAction
    actor: Actor
    level: str
    principal: str | None = None
    agent: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class Moved:
    """The records a transfer moved, and those the target already held (an import)."""

    turns: int = 0
    digests: int = 0
    facts: int = 0
    skipped: int = 0


@dataclass(frozen=True)
class AuditEntry:
    """One record. A transfer's ``erasure_id`` is 0, its turns, digests and facts moved
    are ``short_term``, ``medium_term`` and ``long_term``, and it is ``final`` once
    ``complete``."""

    id: int
    erasure_id: int
    at: float
    actor: Actor
    level: str
    principal: str | None
    agent: str | None
    session: str | None
    short_term: int
    medium_term: int
    long_term: int
    final: bool
    # The signed receipt (canonical JSON, ``kaos_core.memory.receipt``) the forget answered with.
    receipt: str | None = None
    action: AuditAction = "forget"
    outcome: TransferOutcome | None = None
    skipped: int = 0
    source: str | None = None


class AuditLog(Protocol):
    """The audit as the conversation store keeps it (part of ``ConversationStore``)."""

    async def audit(
        self, group: str, limit: int, before: int | None, action: AuditAction | None = None
    ) -> list[AuditEntry]:
        """Records of ``group`` (of ``action`` only, when given), newest first, ids below
        ``before``."""
        ...

    async def add_receipt(self, audit_id: int, receipt: str) -> None:
        """Keep the signed receipt of an erasure on its audit record."""
        ...

    async def record_transfer(self, group: str, transfer: Transfer) -> int:
        """Record ``transfer`` as ``started``; its audit record's id."""
        ...

    async def update_transfer(self, audit_id: int, outcome: TransferOutcome, moved: Moved) -> None:
        """Set how transfer ``audit_id`` ended and what it moved."""
        ...
