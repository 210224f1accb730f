"""An erasure's records as the conversation store keeps them: the tombstone written with
the deletion, what was erased, and which sessions an erasure reaches."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Erased:
    turns: int = 0
    digests: int = 0
    tombstone: Tombstone | None = None
    # The erasure's audit record (``storage.audit``), the forget's receipt.
    audit_id: int | None = None
    # Whether the principal's data key was deleted with the tombstone (crypto-shredding).
    key_shredded: bool = False


@dataclass(frozen=True)
class Tombstone:
    """A recorded erasure: the scope it erases (the fields of a ``Scope``), when, and the
    sessions (conversation keys and session ids) it reached.

    Written in the transaction that deletes the conversational rows, before anything else
    is deleted. While it is pending (not final), no fold work runs on its sessions; it
    becomes final once the long-term tier and Mem0's context are purged after the work
    already in flight on those sessions ended.
    """

    id: int
    group: str
    level: str
    session: str | None
    principal: str | None
    agent: str | None
    erased_at: float
    keys: tuple[str, ...] = ()
    sessions: tuple[str, ...] = ()

    @property
    def lease_key(self) -> str:
        """The key of the ``erase`` lease of whoever finishes this erasure."""
        return f"erasure:{self.id}"


@dataclass(frozen=True)
class ErasureSelector:
    """Which sessions an erasure reaches, found through the attribution index.

    ``key`` set: that one session. Otherwise every session of ``group`` whose attribution
    has ``principal`` and/or ``agent`` (both ``None``: the whole group).
    """

    group: str
    key: str | None = None
    principal: str | None = None
    agent: str | None = None
