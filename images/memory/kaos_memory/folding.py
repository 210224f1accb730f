"""Compaction in the background: fold the oldest turns into a digest, extract them to Mem0.

A write that leaves a session's unfolded turns past the fold trigger schedules one fold
job for that session (at most one queued per session). The job claims a fold in one
transaction (the oldest turns get ``folded_by``), then runs two independently retried
steps: the digest step writes the next digest version from the previous digest and the
pending folds' turns; the extraction step hands exactly that fold's turns to Mem0 once.
An erasure that lands meanwhile wins: a late digest is not written, and facts a late
extraction stored are deleted again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from weakref import WeakValueDictionary

from kaos_memory.executor import BackgroundExecutor
from kaos_memory.metrics import MemoryMetrics
from kaos_memory.scope import Attribution
from kaos_memory.storage.base import (
    ConversationStore,
    Fold,
    FoldPolicy,
    LongTermStore,
    TurnRow,
)
from kaos_memory.summarizer import Summarizer

log = logging.getLogger(__name__)


class RetryLater(Exception):
    """The step found work it could not finish now (a concurrent digest on another replica)."""


class Folder:
    def __init__(
        self,
        *,
        conversation: ConversationStore,
        longterm: LongTermStore,
        summarizer: Summarizer,
        executor: BackgroundExecutor,
        metrics: MemoryMetrics,
        policy: FoldPolicy,
        digest_retention: int,
    ) -> None:
        self.conversation = conversation
        self.longterm = longterm
        self.summarizer = summarizer
        self.executor = executor
        self.metrics = metrics
        self.policy = policy
        self.digest_retention = digest_retention
        self._queued: set[str] = set()
        self._locks: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()

    def schedule(self, attribution: Attribution) -> bool:
        """Queue a fold of the session; False when the queue had no room (degraded)."""
        key = attribution.key
        if key in self._queued:
            return True
        if not self.executor.submit("fold", lambda: self._fold(attribution)):
            return False
        self._queued.add(key)
        return True

    def _lock(self, key: str) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[key] = lock
        return lock

    async def _fold(self, attribution: Attribution) -> None:
        # Writes after this point may queue the next fold of the session.
        self._queued.discard(attribution.key)
        fold = await self.conversation.claim_fold(attribution, self.policy)
        if fold is None:
            return
        log.info(
            "fold claimed",
            extra={"fold_id": fold.id, "turns": len(fold.turns), "key": fold.key},
        )
        digest_ok, extract_ok = await asyncio.gather(
            self.executor.run_with_retry("digest", lambda: self._digest(fold.key)),
            self.executor.run_with_retry("extraction", lambda: self._extract(fold, attribution)),
        )
        if not digest_ok:
            # The turns stay pending: the next fold of this session digests them too.
            self.metrics.folds.labels(outcome="failed").inc()
            self.metrics.degraded.labels(reason="digest_failed").inc()
        if not extract_ok:
            self.metrics.extractions.labels(outcome="failed").inc()
            self.metrics.degraded.labels(reason="extraction_failed").inc()
            await self.conversation.set_extraction(fold.id, "failed")

    async def _digest(self, key: str) -> None:
        async with self._lock(key):
            folds = await self.conversation.pending_digest_folds(key)
            if not folds:
                return
            started = time.perf_counter()
            previous = await self.conversation.latest_digest(key)
            turns = [t for f in folds for t in f.turns]
            summary = await self.summarizer.digest(
                None if previous is None else previous.summary, turns
            )
            version = await self.conversation.add_digest(
                key, summary, [f.id for f in folds], self.digest_retention
            )
            if version is None:
                if await self.conversation.pending_digest_folds(key):
                    raise RetryLater("another digest of this session landed first")
                self.metrics.folds.labels(outcome="skipped").inc()
                return
            self.metrics.folds.labels(outcome="done").inc()
            self.metrics.fold_duration.observe(time.perf_counter() - started)
            log.info("digest written", extra={"key": key, "version": version})

    async def _extract(self, fold: Fold, attribution: Attribution) -> None:
        started = time.perf_counter()
        stored: list[str] = []
        for (principal, agent, infer), turns in _by_attribution(fold.turns).items():
            who = Attribution(
                group=attribution.group, session=fold.session, principal=principal, agent=agent
            )
            stored += await self.longterm.add(turns, who, infer)
        if not await self.conversation.set_extraction(fold.id, "done"):
            # The session was erased while Mem0 worked: the erasure must stand.
            await self.longterm.erase_ids(stored)
            self.metrics.extractions.labels(outcome="erased").inc()
            return
        self.metrics.extractions.labels(outcome="done").inc()
        self.metrics.extraction_duration.observe(time.perf_counter() - started)


def _by_attribution(
    turns: list[TurnRow],
) -> dict[tuple[str | None, str | None, bool], list[TurnRow]]:
    """Turns grouped by who wrote them and whether to infer, in order within each group."""
    groups: dict[tuple[str | None, str | None, bool], list[TurnRow]] = defaultdict(list)
    for turn in turns:
        groups[(turn.principal, turn.agent, turn.infer)].append(turn)
    return dict(groups)
