"""The erasure audit's rows: who erased which scope, when, and how many rows per tier.

Every erasure (by an agent for its user, or by an administrator) is recorded in the same
transaction as its tombstone (``storage.sql.erasure``), so an erasure that happened has
its record; the long-term count is added once the facts are gone (also when a sweeper
finishes the erasure of a replica that died). A record names identities and counts,
never content: no turn, digest or fact text is copied into it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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


@dataclass(frozen=True)
class AuditEntry:
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
