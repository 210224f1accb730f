"""The long-term tier's quarantine, as the service sees it (part of ``LongTermStore``).

A fact whose text reads as an instruction to the agent (``screening``) is held when it is
stored: never recalled, not in the normal listing. An administrator lists the held facts
of a scope with their reason, and releases them (recalled from then on, never screened
again) or erases them (with their text in Mem0's history). A release or erasure names
facts by id and acts on all of them or, when any id names no held fact of the scope, on
none (``UnknownFacts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from kaos_core.memory.contract import Fact

from kaos_memory.scope import Scope


class UnknownFacts(ValueError):
    """Ids that name no held fact of the scope (unknown, released, another scope's)."""

    def __init__(self, count: int) -> None:
        super().__init__(f"{count} of the ids name no quarantined fact of this scope")
        self.count = count


@dataclass(frozen=True)
class Quarantined:
    fact: Fact
    # The screening's reason code (``screening.REASONS``).
    reason: str


class QuarantineStore(Protocol):
    async def list_quarantined(
        self, scope: Scope, limit: int, cursor: str | None
    ) -> tuple[list[Quarantined], str | None]:
        """One page of the scope's held facts in listing order, and the next cursor."""
        ...

    async def release(self, scope: Scope, ids: list[str]) -> int:
        """Release the held facts ``ids`` of ``scope``; how many (``UnknownFacts``: none)."""
        ...

    async def erase_quarantined(self, scope: Scope, ids: list[str]) -> int:
        """Erase the held facts ``ids`` of ``scope`` and their text in Mem0's history; how
        many (``UnknownFacts``: none)."""
        ...


__all__ = ["QuarantineStore", "Quarantined", "UnknownFacts"]
