"""The quotas a write is checked against in the conversation store, and the refusal
(``kaos_memory.quota`` decides them and answers the refusal)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WriteQuota:
    """The quotas a write is checked against inside its own transaction (``quota``):
    ``None`` is no limit. The storage limits are the principal's, the rate the agent's."""

    principal_turns: int | None = None
    principal_bytes: int | None = None
    agent_writes_per_minute: int | None = None


class QuotaExceeded(Exception):
    """A write over a quota (nothing was written): ``kind`` names it (``turns``, ``bytes``,
    ``facts``, ``write_rate``); ``retry_after`` seconds for a rate, else None."""

    def __init__(self, kind: str, limit: int, retry_after: int | None = None) -> None:
        super().__init__(kind)
        self.kind = kind
        self.limit = limit
        self.retry_after = retry_after
