"""Retention that deletes: what the store's retention says is past its age is erased by
the sweeper, through the erasure machinery, never hidden by a filter.

Each sweep (any replica; the erasures' own tombstones and leases keep replicas from
doubling work)

- erases every session of the store nobody wrote to for ``idle_session_age`` seconds, as a
  session-level forget does (``erasure``: the tombstone fences fold work, the window,
  digest versions, folds and attribution go in one transaction, then the session's facts
  and Mem0's context of it); its audit record names the actor ``retention``;
- erases every fact older than ``fact_max_age`` seconds by id (its vector, row and text in
  Mem0's history), recorded as one final store-level erasure per batch by ``retention``.

Both run until nothing past its age is left, so a record past its age is gone when the
sweep ends; every record erased is counted per tier in ``records_expired``. Digest
versions kept per session are the tiers' ``digest_retention``, enforced when each new
version is written (``storage.sql.folds.add_digest``), so retention does not prune them
again. Times come from the service's clock; a fact's age from the time Mem0 stored it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kaos_memory.clock import Clock, iso, wall_clock
from kaos_memory.erasure import Eraser
from kaos_memory.metrics import MemoryMetrics
from kaos_memory.scope import Scope
from kaos_memory.settings import RetentionSettings
from kaos_memory.storage.audit import Actor
from kaos_memory.storage.base import ConversationStore, ErasureSelector, LongTermStore
from kaos_memory.storage.errors import StorageError

log = logging.getLogger(__name__)

# The actor of retention's audit records: the service itself.
RETENTION_ACTOR = Actor(kind="retention", name="retention", verified=True)
# Sessions or facts taken per storage round (a batch of facts is one audit record); a
# sweep takes rounds until none is left.
SESSION_BATCH = 100
FACT_BATCH = 1000


@dataclass(frozen=True)
class RetentionPolicy:
    """Ages in seconds past which records are erased (None: kept)."""

    fact_max_age: float | None = None
    idle_session_age: float | None = None

    @property
    def enabled(self) -> bool:
        return self.fact_max_age is not None or self.idle_session_age is not None


@dataclass
class Expired:
    """What one sweep erased, per tier, and whether everything past its age went."""

    turns: int = 0
    digests: int = 0
    facts: int = 0
    sessions: int = 0
    complete: bool = True


class Retention:
    def __init__(
        self,
        *,
        group: str,
        policy: RetentionPolicy,
        conversation: ConversationStore,
        longterm: LongTermStore,
        eraser: Eraser,
        metrics: MemoryMetrics,
        clock: Clock = wall_clock,
    ) -> None:
        self.group = group
        self.policy = policy
        self.conversation = conversation
        self.longterm = longterm
        self.eraser = eraser
        self.metrics = metrics
        self.clock = clock

    async def sweep(self) -> Expired:
        """Erase everything past its age now; what was erased."""
        expired = Expired()
        if self.policy.idle_session_age is not None:
            await self._sessions(iso(self.clock() - self.policy.idle_session_age), expired)
        if self.policy.fact_max_age is not None:
            await self._facts(iso(self.clock() - self.policy.fact_max_age), expired)
        for tier, count in (
            ("short_term", expired.turns),
            ("medium_term", expired.digests),
            ("long_term", expired.facts),
        ):
            if count:
                self.metrics.records_expired.labels(tier=tier).inc(count)
        if expired.sessions or expired.facts:
            log.info(
                "retention erased",
                extra={
                    "sessions": expired.sessions,
                    "turns": expired.turns,
                    "digests": expired.digests,
                    "facts": expired.facts,
                    "complete": expired.complete,
                },
            )
        return expired

    async def _sessions(self, before: str, expired: Expired) -> None:
        tried: set[str] = set()
        while True:
            try:
                idle = await self.conversation.sessions_idle_since(
                    self.group, before, SESSION_BATCH
                )
            except StorageError:
                log.warning("listing idle sessions failed", exc_info=True)
                expired.complete = False
                return
            # A session whose erasure could not even be recorded stays listed: once per sweep.
            fresh = [s for s in idle if s.key not in tried]
            if not fresh:
                return
            for session in fresh:
                tried.add(session.key)
                scope = Scope(
                    level="session",
                    group=self.group,
                    session=session.session,
                    principal=None,
                    agent=None,
                )
                selector = ErasureSelector(group=self.group, key=session.key)
                result = await self.eraser.forget(scope, selector, RETENTION_ACTOR)
                expired.sessions += 1
                expired.turns += result.erased.turns
                expired.digests += result.erased.digests
                expired.facts += result.facts
                if result.failures or not result.final:
                    expired.complete = False

    async def _facts(self, before: str, expired: Expired) -> None:
        while True:
            try:
                ids = await self.longterm.facts_created_before(self.group, before, FACT_BATCH)
            except StorageError:
                log.warning("listing expired facts failed", exc_info=True)
                expired.complete = False
                return
            if not ids:
                return
            result = await self.eraser.expire_facts(self.group, ids, RETENTION_ACTOR)
            expired.facts += result.facts
            if result.failures or not result.facts:
                # Nothing went (already gone, or the store failed): the next sweep retries.
                expired.complete = expired.complete and not result.failures
                return


def retention_policy(settings: RetentionSettings) -> RetentionPolicy:
    return RetentionPolicy(
        fact_max_age=settings.fact_max_age, idle_session_age=settings.idle_session_age
    )
