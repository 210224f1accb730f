"""The rows an export reads and an import writes (``kaos_memory.portable``), as they cross
the storage interfaces (``base``): texts in the clear, attribution unescaped."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StoredDigest", "StoredFact", "StoredSession", "StoredTurn"]


@dataclass(frozen=True)
class StoredTurn:
    """A turn as an export reads it and an import writes it (``portable``): its session,
    its attribution, and whether it was folded out of the window."""

    session: str
    role: str
    content: str
    tokens: int
    at: str
    principal: str | None
    agent: str | None
    infer: bool
    folded: bool
    seq: int = 0
    # A sealed row's record id (the text is bound to it) and, on import, the id of the key
    # that sealed it (None: in the clear).
    rid: str | None = None
    key_id: str | None = None
    # A saved fact's origin (``NewTurn.source``); None: a conversation turn.
    source: str | None = None


@dataclass(frozen=True)
class StoredDigest:
    session: str
    version: int
    summary: str
    created_at: str


@dataclass(frozen=True)
class StoredSession:
    """A session an export reaches through the attribution index: its conversation key,
    its session id and whose session it is (None: no principal)."""

    key: str
    session: str
    principal: str | None = None


@dataclass(frozen=True)
class StoredFact:
    """A fact with everything an export carries: its attribution (unescaped), its times and
    the other payload fields it was stored with (provenance such as the fold)."""

    id: str
    text: str
    group: str
    session: str
    principal: str | None
    agent: str | None
    created_at: str
    updated_at: str | None
    metadata: dict[str, str | int | float | bool | None]
