"""The long-term tier of a store configured without one (``KAOS_MEMORY_LONG_TERM_ENABLED=false``).

A window-and-digest store: nothing is extracted and nothing is indexed, so neither Mem0
nor a vector store (Chroma collection, pgvector table) is ever created. It satisfies the
``LongTermStore`` interface with answers that are true of an empty tier: a fold's
extraction stores no facts (and so completes), a search or listing finds none (not a
failure: the answer is not degraded), an erasure erases none. No cursor is ever given
out, so any cursor a client sends is refused as one this service did not give.
"""

from __future__ import annotations

from kaos_core.memory.contract import Fact
from kaos_core.telemetry.genai_metrics import GenAiMetrics

from kaos_memory.scope import Attribution, Scope
from kaos_memory.storage.base import CURRENT, FoldTag, StoredFact, TurnRow, View
from kaos_memory.storage.quarantine import Quarantined, UnknownFacts


class DisabledLongTermStore:
    """``LongTermStore`` of a store without long-term memory."""

    def measure_with(self, metrics: GenAiMetrics) -> None:
        return None

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def ping(self) -> None:
        return None

    async def add(
        self, turns: list[TurnRow], attribution: Attribution, infer: bool, tag: FoldTag
    ) -> list[str]:
        return []

    async def erase_fold(self, group: str, session: str, fold_id: int) -> int:
        return 0

    async def search(
        self,
        scope: Scope,
        query: str,
        top_k: int,
        sources: frozenset[str] | None = None,
        view: View = CURRENT,
    ) -> list[Fact]:
        return []

    async def list_facts(
        self, scope: Scope, limit: int, cursor: str | None, view: View = CURRENT
    ) -> tuple[list[Fact], str | None]:
        return [], None

    async def erase(self, scope: Scope, keys: tuple[str, ...] = ()) -> int:
        return 0

    async def reclaim(self) -> None:
        return None

    def held_principals(self) -> tuple[int, int]:
        return 0, 0

    def check_cursor(self, cursor: str) -> None:
        raise ValueError("no long-term tier: no cursor was given out")

    async def erase_ids(self, ids: list[str]) -> int:
        return 0

    async def facts_created_before(self, group: str, before: str, limit: int) -> list[str]:
        return []

    async def count_facts(self, group: str, principal: str) -> int:
        return 0

    async def export_facts(
        self, scope: Scope, limit: int, cursor: str | None
    ) -> tuple[list[StoredFact], str | None]:
        return [], None

    async def list_quarantined(
        self, scope: Scope, limit: int, cursor: str | None
    ) -> tuple[list[Quarantined], str | None]:
        return [], None

    async def release(self, scope: Scope, ids: list[str]) -> int:
        raise UnknownFacts(len(set(ids)))

    async def erase_quarantined(self, scope: Scope, ids: list[str]) -> int:
        raise UnknownFacts(len(set(ids)))

    async def import_facts(self, facts: list[StoredFact]) -> int:
        # The importer refuses facts for a store without the tier before anything is
        # written (``portable.importer``).
        raise ValueError("no long-term tier: facts cannot be imported")
