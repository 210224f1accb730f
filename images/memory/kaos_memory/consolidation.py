"""Consolidation in the background: fold the oldest turns into a digest, extract them to Mem0.

A write that takes a session's unfolded turns past the fold trigger records a fold in its
own transaction (the oldest turns get ``folded_by``; the fold row is the outbox entry of
their digest and extraction) and schedules one job for that session (at most one queued
per session and replica). The job works the session's outbox in two independent steps:

- digest: under the session's ``digest`` lease, every pending fold goes into the next
  digest version (one model call for however many folds are pending);
- extraction: under the session's ``extract`` lease, pending folds go to Mem0 one at a
  time, oldest first, so two extractions of one scope never overlap (Mem0's
  deduplication would race) and facts arrive in conversation order.

Leases are rows with an expiry the holder renews; a replica that dies leaves its leases to
lapse and its folds pending, and the sweeper of any replica schedules them again.
Extraction is at-least-once and idempotent at the outcome: every fact carries its fold and
attempt, a new attempt first deletes what an earlier one stored, and marking the fold done
is fenced by the lease, so a holder that lost it deletes its own facts instead.

An erasure that lands meanwhile wins: a late digest is not written, and facts a late
extraction stored are deleted again.

A model may answer, but unusably (``summarizer.UnusableDigest``, ``storage.errors.
UnusableAnswer``): each such answer is counted and recorded on the step's span, and the
model is asked again up to ``answer_retries`` times. A digest that stays unusable keeps the
previous version and leaves its folds pending, backing off like any failed digest. An
extraction that stays unusable is recorded as ``unusable`` at once (asking again later
would most likely get the same answer), so the session's later folds go on; its turns
stay in the conversation store and in the digest.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from opentelemetry import trace

from kaos_memory.clock import Clock, wall_clock
from kaos_memory.executor import BackgroundExecutor, PermanentJobError
from kaos_memory.metrics import MemoryMetrics
from kaos_memory.scope import Attribution
from kaos_memory.storage.base import (
    ConversationStore,
    ExtractionStatus,
    Fold,
    FoldPolicy,
    FoldTag,
    LeaseKind,
    LongTermStore,
    TurnRow,
)
from kaos_memory.storage.errors import UnusableAnswer
from kaos_memory.storage.mem0.llm import ExtractionAnswers, observe_answers
from kaos_memory.storage.model_call import ANSWER_REASON
from kaos_memory.summarizer import Summarizer, UnusableDigest
from kaos_memory.telemetry import fold_span

log = logging.getLogger(__name__)


class RetryLater(Exception):
    """The step found work it could not finish now (a concurrent digest on another replica)."""


class LeaseLost(PermanentJobError):
    """The session's lease passed to another replica; that replica finishes the work."""


class DigestUnusable(PermanentJobError):
    """Every answer to this digest job was unusable; the folds wait for a later job (the
    job's own retries would only ask again what ``answer_retries`` already asked)."""


def replica_id() -> str:
    """This process among the store's replicas: host (the pod name), pid and a nonce."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass
class Lease:
    key: str
    kind: LeaseKind
    owner: str
    lost: bool = field(default=False)


# The longest failing fold work waits in the outbox between two jobs.
MAX_BACKOFF = 900.0


@dataclass(frozen=True)
class ConsolidationPolicy:
    fold: FoldPolicy
    digest_retention: int
    lease_ttl: float
    max_attempts: int
    sweep_interval: float
    # Extractions (Mem0 calls) running at once across this replica's sessions.
    extraction_concurrency: int = 2
    # Further digest calls after an unusable answer (extraction's are ``storage.mem0.llm``'s).
    answer_retries: int = 2


class Consolidator:
    """Schedules and runs the digest and extraction work of one store's sessions."""

    def __init__(
        self,
        *,
        group: str,
        conversation: ConversationStore,
        longterm: LongTermStore,
        summarizer: Summarizer,
        executor: BackgroundExecutor,
        metrics: MemoryMetrics,
        policy: ConsolidationPolicy,
        replica: str | None = None,
        clock: Clock = wall_clock,
    ) -> None:
        self.group = group
        self.conversation = conversation
        self.longterm = longterm
        self.summarizer = summarizer
        self.executor = executor
        self.metrics = metrics
        self.policy = policy
        self.replica = replica or replica_id()
        self.clock = clock
        self._queued: set[str] = set()
        # Bounds the model and vector-store load of extraction, which a burst of folds of
        # many sessions would otherwise multiply by the executor's workers.
        self._extracting = asyncio.Semaphore(policy.extraction_concurrency)

    # --- scheduling ---------------------------------------------------------------------------

    def schedule(self, key: str, session: str, *, cause: str = "write") -> bool:
        """Queue consolidation of a session; False when the queue had no room (degraded)."""
        return self._submit(key, cause, lambda: self._consolidate(key, session, None))

    def schedule_flush(self, key: str, session: str, idle_since: str) -> bool:
        """Queue an idle flush: fold the whole remaining window if still idle."""
        return self._submit(key, "idle", lambda: self._consolidate(key, session, idle_since))

    def _submit(self, key: str, cause: str, job: Callable[[], Awaitable[None]]) -> bool:
        if key in self._queued:
            return True
        if not self.executor.submit("fold", job):
            return False
        self._queued.add(key)
        self.metrics.scheduled.labels(cause=cause).inc()
        return True

    async def _consolidate(self, key: str, session: str, idle_since: str | None) -> None:
        # Writes after this point may queue the next consolidation of the session.
        self._queued.discard(key)
        if idle_since is not None:
            fold = await self.conversation.flush_session(key, session, idle_since)
            if fold is not None:
                log.info(
                    "idle session flushed",
                    extra={"fold_id": fold.id, "turns": len(fold.turns), "key": key},
                )
        else:
            # A write records its fold only when it gets the key's lock at once (it never
            # queues behind background work); one that did not left the claim to this job.
            # A no-op when the session is under its trigger.
            await self.conversation.claim_fold(key, session, self.policy.fold)
        await asyncio.gather(self._digests(key), self._extractions(key))

    # --- leases -------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _lease(self, key: str, kind: LeaseKind) -> AsyncIterator[Lease | None]:
        """Hold the session's ``kind`` lease while the body runs, renewing it; ``None`` when
        another holder has it."""
        lease = Lease(key, kind, f"{self.replica}/{uuid.uuid4().hex[:8]}")
        ttl = self.policy.lease_ttl
        if not await self.conversation.acquire_lease(key, kind, lease.owner, ttl):
            yield None
            return
        renewer = asyncio.create_task(self._renew(lease), name=f"lease-{kind}")
        try:
            yield lease
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            try:
                await self.conversation.release_lease(key, kind, lease.owner)
            except Exception:  # noqa: BLE001  (it lapses by itself)
                log.warning("releasing a lease failed", extra={"key": key, "kind": kind})

    async def _renew(self, lease: Lease) -> None:
        ttl = self.policy.lease_ttl
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                held = await self.conversation.renew_lease(lease.key, lease.kind, lease.owner, ttl)
            except Exception:  # noqa: BLE001  (a database blip: try again next period)
                log.warning("renewing a lease failed", extra={"key": lease.key})
                continue
            if not held:
                lease.lost = True
                return

    async def _drain(
        self, key: str, kind: LeaseKind, pending: Callable[[], Awaitable[bool]], work: WorkFn
    ) -> None:
        """Run ``work`` under the lease while ``pending``; re-check after releasing, so work
        queued while another job held the lease is not left for the sweeper."""
        while True:
            async with self._lease(key, kind) as lease:
                if lease is None:
                    return
                if not await work(lease):
                    return
            if not await pending():
                return

    async def _defer(self, fold_ids: list[int]) -> float:
        return await self.conversation.defer(
            fold_ids, base=self.policy.sweep_interval, cap=MAX_BACKOFF
        )

    # --- digest -------------------------------------------------------------------------------

    async def _digests(self, key: str) -> None:
        async def pending() -> bool:
            return bool(await self.conversation.pending_digest_folds(key))

        async def work(lease: Lease) -> bool:
            ok = await self.executor.run_with_retry("digest", lambda: self._digest(key))
            if not ok:
                # The turns stay pending: the next fold of this session, or a sweep after a
                # back-off, digests them.
                self.metrics.folds.labels(outcome="failed").inc()
                self.metrics.degraded.labels(reason="digest_failed").inc()
                folds = await self.conversation.pending_digest_folds(key)
                delay = await self._defer([f.id for f in folds])
                log.warning("digest deferred", extra={"key": key, "retry_in_s": round(delay, 1)})
            return ok

        await self._drain(key, "digest", pending, work)

    async def _digest(self, key: str) -> None:
        folds = await self.conversation.pending_digest_folds(key)
        if not folds:
            return
        # Linked to the writes that recorded the folds (their trace contexts, stored).
        with fold_span("digest", self.group, self.replica, folds):
            await self._digest_folds(key, folds)

    async def _digest_folds(self, key: str, folds: list[Fold]) -> None:
        started = time.perf_counter()
        previous = await self.conversation.latest_digest(key)
        turns = [t for f in folds for t in f.turns]
        summary = await self._usable_digest(None if previous is None else previous.summary, turns)
        version = await self.conversation.add_digest(
            key, summary, [f.id for f in folds], self.policy.digest_retention
        )
        if version is None:
            if await self.conversation.pending_digest_folds(key):
                raise RetryLater("another digest of this session landed first")
            self.metrics.folds.labels(outcome="skipped").inc()
            return
        self.metrics.folds.labels(outcome="done").inc()
        self.metrics.fold_duration.observe(time.perf_counter() - started)
        log.info("digest written", extra={"key": key, "version": version, "folds": len(folds)})

    async def _usable_digest(self, previous: str | None, turns: list[TurnRow]) -> str:
        for _ in range(self.policy.answer_retries + 1):
            try:
                return await self.summarizer.digest(previous, turns)
            except UnusableDigest as exc:
                self._unusable("digest", exc.reason)
        raise DigestUnusable("no usable digest from the summarisation model")

    def _unusable(self, step: str, reason: str) -> None:
        """Count one unusable answer and note it on the step's span (its reason only)."""
        self.metrics.unusable_answers.labels(step=step, reason=reason).inc()
        trace.get_current_span().add_event("kaos.memory.unusable_answer", {ANSWER_REASON: reason})

    # --- extraction ---------------------------------------------------------------------------

    async def _extractions(self, key: str) -> None:
        async def pending() -> bool:
            return await self.conversation.next_extraction(key) is not None

        async def work(lease: Lease) -> bool:
            while (fold := await self.conversation.next_extraction(key)) is not None:
                if fold.retry_at is not None and fold.retry_at > self.clock():
                    return False  # backing off after failures; a later sweep resumes
                ok = await self.executor.run_with_retry(
                    "extraction", functools.partial(self._extract, fold, lease)
                )
                if lease.lost:
                    self.metrics.lease_lost.labels(kind="extract").inc()
                    return False
                if not ok:
                    await self._give_up_or_defer(fold, lease)
                    return False
            return True

        await self._drain(key, "extract", pending, work)

    async def _give_up_or_defer(self, fold: Fold, lease: Lease) -> None:
        """After a job's retries: back off in the outbox, or give up on a poison batch."""
        self.metrics.extractions.labels(outcome="failed").inc()
        self.metrics.degraded.labels(reason="extraction_failed").inc()
        latest = await self.conversation.next_extraction(fold.key)
        attempts = latest.attempts if latest is not None and latest.id == fold.id else 0
        if attempts >= self.policy.max_attempts:
            # Recorded as failed so the session's later folds go on.
            await self.conversation.finish_extraction(fold, lease.owner, "failed")
            log.error(
                "extraction abandoned",
                extra={"fold_id": fold.id, "key": fold.key, "attempts": attempts},
            )
            return
        # It stays pending; the sweeper retries it after a delay that doubles per failed
        # job (a model outage costs a few calls per period, not a stream of them).
        delay = await self._defer([fold.id])
        log.warning(
            "extraction deferred",
            extra={"fold_id": fold.id, "attempts": attempts, "retry_in_s": round(delay, 1)},
        )

    async def _extract(self, fold: Fold, lease: Lease) -> None:
        async with self._extracting:
            with fold_span("extract", self.group, self.replica, [fold]):
                await self._extract_fold(fold, lease)

    async def _extract_fold(self, fold: Fold, lease: Lease) -> None:
        attempt = await self.conversation.begin_extraction(fold, lease.owner)
        if attempt is None:
            lease.lost = True
            raise LeaseLost(f"fold {fold.id}: lease lost or fold no longer pending")
        started = time.perf_counter()
        if attempt > 1:
            # An earlier attempt (a retry, or a replica that died) may have stored some facts.
            removed = await self.longterm.erase_fold(self.group, fold.session, fold.id)
            if removed:
                log.info("earlier attempt undone", extra={"fold_id": fold.id, "facts": removed})
        # If this attempt fails half way, the next attempt (on any replica) removes its facts.
        stored: list[str] = []
        status: ExtractionStatus = "done"
        with observe_answers() as answers:
            try:
                for (principal, agent, infer), turns in _by_attribution(fold.turns).items():
                    who = Attribution(
                        group=self.group, session=fold.session, principal=principal, agent=agent
                    )
                    try:
                        stored += await self.longterm.add(
                            turns, who, infer, FoldTag(fold.id, attempt)
                        )
                    except UnusableAnswer:
                        # The other writers' turns of the fold are still worth extracting.
                        status = "unusable"
            finally:
                self._record_answers(answers)
        trace.get_current_span().set_attribute("kaos.memory.extraction.status", status)
        outcome = await self.conversation.finish_extraction(fold, lease.owner, status)
        if outcome == "gone":
            # The session was erased while Mem0 worked: the erasure must stand.
            await self.longterm.erase_ids(stored)
            self.metrics.extractions.labels(outcome="erased").inc()
            return
        if outcome == "lost":
            # Another replica took the session over; its attempt deletes ours and redoes it,
            # but ours may land after its deletion, so remove what we stored.
            await self.longterm.erase_ids(stored)
            lease.lost = True
            raise LeaseLost(f"fold {fold.id}: lease lost before the extraction was recorded")
        self.metrics.extractions.labels(outcome=status).inc()
        self.metrics.extraction_duration.observe(time.perf_counter() - started)
        if status == "unusable":
            self.metrics.degraded.labels(reason="extraction_unusable").inc()
            log.warning(
                "extraction recorded unusable: the model's answers were not Mem0's JSON",
                extra={"fold_id": fold.id, "key": fold.key, "answers": len(answers.answers)},
            )

    def _record_answers(self, answers: ExtractionAnswers) -> None:
        """Count the extraction's unusable answers (also those of an attempt that failed
        otherwise after them) and note them on its span."""
        for reason in answers.unusable:
            self._unusable("extraction", reason)
        for reason in answers.unusable_supersessions:
            self._unusable("supersession", reason)
        self.metrics.retired_facts.inc(answers.retired)
        span = trace.get_current_span()
        span.set_attribute("kaos.memory.extraction.answers", len(answers.answers))
        span.set_attribute("kaos.memory.extraction.unusable_answers", len(answers.unusable))
        span.set_attribute("kaos.memory.extraction.supersessions", len(answers.supersessions))
        span.set_attribute("kaos.memory.extraction.retired_facts", answers.retired)


WorkFn = Callable[[Lease], Awaitable[bool]]


def _by_attribution(
    turns: list[TurnRow],
) -> dict[tuple[str | None, str | None, bool], list[TurnRow]]:
    """Turns grouped by who wrote them and whether to infer, in order within each group."""
    groups: dict[tuple[str | None, str | None, bool], list[TurnRow]] = defaultdict(list)
    for turn in turns:
        groups[(turn.principal, turn.agent, turn.infer)].append(turn)
    return dict(groups)
