"""Quotas on the write path: per principal (facts, stored turns, bytes) and per agent
(writes per calendar minute).

Every check happens before anything is written, and a refused write writes nothing:

- the turns, bytes and write-rate quotas are counted at the start of the write's own
  transaction (``storage.sql.retention.check_quota``), so a refusal rolls back with the
  transaction. They are exact under any concurrency, on every replica: the agent's minute
  counter is one conditional upsert (PostgreSQL's row lock orders concurrent writers), and
  a principal's writers take a per-principal lock before reading the principal's usage
  (PostgreSQL's advisory lock; SQLite has one writer). The rate is a fixed calendar
  minute, so across a minute's boundary an agent may make up to twice its rate within
  sixty seconds.
- the facts quota reads the principal's facts in the vector store before the write.
  Facts are added by extraction after the write, not by it, so the count may pass the
  quota by what the turns already accepted yield; when the vector store does not answer
  the count, the write goes on (marked in ``degraded{reason="quota_check"}``) rather than
  tying every write to it.

A rate refusal is 429 ``rate_limited`` with ``Retry-After`` (seconds to the next minute); a
storage refusal is 403 ``quota_exceeded``. Each is counted by kind in
``quota_rejections``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kaos_core.errors import Forbidden, KaosError, TooManyRequests

from kaos_memory.metrics import MemoryMetrics
from kaos_memory.scope import Attribution
from kaos_memory.settings import QuotaSettings
from kaos_memory.storage.base import LongTermStore
from kaos_memory.storage.errors import StorageError
from kaos_memory.storage.limits import QuotaExceeded, WriteQuota

log = logging.getLogger(__name__)

_WHAT = {
    "facts": "long-term facts",
    "turns": "stored turns",
    "bytes": "bytes of stored turns",
}


@dataclass(frozen=True)
class QuotaPolicy:
    """The store's quotas (None: unlimited)."""

    facts: int | None = None
    turns: int | None = None
    bytes: int | None = None
    writes_per_minute: int | None = None

    @property
    def enabled(self) -> bool:
        return any(
            v is not None for v in (self.facts, self.turns, self.bytes, self.writes_per_minute)
        )

    def write_quota(self) -> WriteQuota | None:
        """What the write's transaction checks (None: nothing)."""
        if self.turns is None and self.bytes is None and self.writes_per_minute is None:
            return None
        return WriteQuota(
            principal_turns=self.turns,
            principal_bytes=self.bytes,
            agent_writes_per_minute=self.writes_per_minute,
        )


class QuotaGate:
    def __init__(
        self,
        *,
        group: str,
        policy: QuotaPolicy,
        longterm: LongTermStore,
        metrics: MemoryMetrics,
    ) -> None:
        self.group = group
        self.policy = policy
        self.longterm = longterm
        self.metrics = metrics
        self.write_quota = policy.write_quota()

    async def check_facts(self, attribution: Attribution) -> None:
        """Refuse a write of a principal at or above the facts quota (before it is written)."""
        limit = self.policy.facts
        if limit is None or attribution.principal is None:
            return
        try:
            held = await self.longterm.count_facts(self.group, attribution.principal)
        except StorageError:
            log.warning("counting the principal's facts failed", exc_info=True)
            self.metrics.degraded.labels(reason="quota_check").inc()
            return
        if held >= limit:
            raise self.refusal(QuotaExceeded("facts", limit))

    def refusal(self, exceeded: QuotaExceeded) -> KaosError:
        """The answer to a write over a quota, counted."""
        self.metrics.quota_rejections.labels(kind=exceeded.kind).inc()
        if exceeded.kind == "write_rate":
            retry_after = exceeded.retry_after or 1
            return TooManyRequests(
                f"this agent's writes are limited to {exceeded.limit} per minute;"
                f" retry after {retry_after} s",
                code="rate_limited",
                headers=[("Retry-After", str(retry_after))],
            )
        what = _WHAT.get(exceeded.kind, exceeded.kind)
        return Forbidden(
            f"the principal's quota of {exceeded.limit} {what} is reached; nothing was"
            " written (forget some memory, or ask the store's owner for more)",
            code="quota_exceeded",
        )


def quota_policy(settings: QuotaSettings) -> QuotaPolicy:
    return QuotaPolicy(
        facts=settings.quota_facts,
        turns=settings.quota_turns,
        bytes=settings.quota_bytes,
        writes_per_minute=settings.quota_writes_per_minute,
    )
