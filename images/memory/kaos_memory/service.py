"""The tier composition: write, recall, list and forget over the three tiers.

Scope and attribution come from ``scope``; this module decides what each operation
touches and how failures surface. A store failure is a ``StorageError`` (the stores wrap
their drivers' errors): recall and list are always soft, a failing tier is left empty and
the answer says ``degraded``. Write and forget are soft unless the request (or the store's
default) says strict, in which case a failure is a 500 ``StrictFailure``. Anything else a
store raises is a bug and becomes a plain 500 with the request id. A strict write first
checks that the long-term store answers and that background work can be queued, so a
strict write that fails has written nothing. Messages are fixed per failure; the cause
goes to the log only.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Coroutine
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from kaos_core.errors import BadRequest, Forbidden, StrictFailure
from kaos_core.memory.contract import (
    CONVERSATIONAL_TIERS,
    AuditRequest,
    AuditResponse,
    ErasureReceipt,
    Fact,
    FailureMode,
    ForgetRequest,
    ForgetResponse,
    Forgotten,
    ListRequest,
    ListResponse,
    LongTerm,
    MediumTerm,
    RecallRequest,
    RecallResponse,
    ShortTerm,
    Tier,
    WindowTurn,
    WriteRequest,
    WriteResponse,
)
from kaos_core.wire import Identity

from kaos_memory.audit import wire_record
from kaos_memory.compaction import count_tokens, fold_policy, window
from kaos_memory.consolidation import Consolidator
from kaos_memory.erasure import Eraser, ErasureResult
from kaos_memory.metrics import MemoryMetrics
from kaos_memory.quota import QuotaGate
from kaos_memory.receipts import ReceiptSigner, receipt_for
from kaos_memory.scope import (
    Posture,
    Scope,
    conversation_key,
    derive_attribution,
    derive_scope,
)
from kaos_memory.settings import PostureSettings, TierSettings
from kaos_memory.storage.audit import UNKNOWN_ACTOR, Actor
from kaos_memory.storage.base import (
    ConversationStore,
    ErasedSince,
    ErasureSelector,
    LongTermStore,
    NewTurn,
    SessionBound,
    View,
)
from kaos_memory.storage.errors import StorageError
from kaos_memory.storage.limits import QuotaExceeded

log = logging.getLogger(__name__)

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")

# A tier failed: a store error, or a long-term search past its deadline.
TIER_FAILURES = (StorageError, TimeoutError)


@dataclass(frozen=True)
class Conversational:
    short_term: ShortTerm
    medium_term: MediumTerm
    degraded: bool = False


EMPTY_CONVERSATION = Conversational(ShortTerm(), MediumTerm())


async def _alongside(first: Awaitable[A], second: Coroutine[Any, Any, B]) -> tuple[A, B]:
    """``first`` and ``second`` at once, each tier's read waiting on its own store.

    ``second`` runs as a task and ``first`` in the caller's own: ``gather`` would run both
    as tasks and wake the caller through a callback, each a turn of the event loop on
    every recall. Either failing (a bug: a tier's store errors are answers) or the caller
    being cancelled ends the other too."""
    task = asyncio.ensure_future(second)
    try:
        result = await first
    except BaseException:
        task.cancel()
        raise
    return result, await task


def _view(req: RecallRequest) -> View:
    as_of = None if req.as_of is None else datetime.fromisoformat(req.as_of)
    return View(as_of=as_of, history=req.history)


def fact_block(facts: list[Fact]) -> str:
    """The recalled facts as one text block an agent can put in its context."""
    return "\n".join(f"- {f.text}" for f in facts)


class MemoryService:
    def __init__(
        self,
        *,
        group: str,
        tiers: TierSettings,
        posture: PostureSettings,
        conversation: ConversationStore,
        longterm: LongTermStore,
        consolidator: Consolidator,
        eraser: Eraser,
        metrics: MemoryMetrics,
        receipts: ReceiptSigner | None = None,
        quota: QuotaGate | None = None,
    ) -> None:
        self.group = group
        self.tiers = tiers
        self.posture_settings = posture
        self.conversation = conversation
        self.longterm = longterm
        self.consolidator = consolidator
        self.eraser = eraser
        self.metrics = metrics
        self.receipts = receipts
        self.quota = quota
        self.posture = Posture(
            require_principal=posture.require_principal,
            require_agent_identity=posture.require_agent_identity,
        )
        self.policy = fold_policy(tiers)

    def _mode(self, requested: FailureMode | None) -> FailureMode:
        return requested or self.posture_settings.default_failure_mode

    async def _timed(self, tier: str, op: str, aw: Awaitable[T]) -> T:
        started = time.perf_counter()
        try:
            return await aw
        finally:
            self.metrics.tier_latency.labels(tier=tier, op=op).observe(
                time.perf_counter() - started
            )

    def _scope(self, identity: Identity, level: str, include: list[Tier] | None) -> Scope:
        conversational = (
            include is not None and level != "store" and bool(set(include) & CONVERSATIONAL_TIERS)
        )
        return derive_scope(
            identity,
            level,  # type: ignore[arg-type]
            posture=self.posture,
            ceiling=self.posture_settings.max_read_scope,
            group=self.group,
            conversational=conversational,
        )

    # --- write ----------------------------------------------------------------------------

    async def write(self, identity: Identity, req: WriteRequest) -> tuple[WriteResponse, int]:
        attribution = derive_attribution(identity, self.posture, self.group)
        strict = self._mode(req.failure_mode) == "strict"
        if strict:
            await self._check_writable()
        # A conversation turn's role says who said it; saved facts record their origin.
        source = None if req.origin == "conversation" else req.origin
        turns = [
            NewTurn(t.role, t.content, count_tokens(t.content), source=source) for t in req.turns
        ]
        quota = None
        if self.quota is not None:
            await self.quota.check_facts(attribution)
            quota = self.quota.write_quota
        said_at = None if req.said_at is None else datetime.fromisoformat(req.said_at).timestamp()
        try:
            appended = await self._timed(
                "short_term",
                "append",
                self.conversation.append(
                    attribution, turns, req.infer, self.policy, quota, said_at
                ),
            )
        except ErasedSince:
            self.metrics.writes_erased.inc()
            return WriteResponse(accepted=0, scheduled=False, erased=True), 200
        except QuotaExceeded as exceeded:
            assert self.quota is not None
            raise self.quota.refusal(exceeded) from None
        except SessionBound:
            raise Forbidden(
                "this session belongs to another principal; a session is one principal's"
                " conversation",
                code="session_bound",
            ) from None
        except StorageError as exc:
            log.error("window append failed", exc_info=True)
            self.metrics.degraded.labels(reason="write_failed").inc()
            if strict:
                raise StrictFailure("the conversation store failed") from exc
            return WriteResponse(accepted=0, scheduled=False, degraded=True), 200
        scheduled = degraded = False
        if self.policy.crossed(appended.stats.tokens, appended.stats.events):
            # The fold is durable in the outbox already (``appended.fold_id``) or, when
            # background work held the session's lock, the job records it; a full queue
            # only delays it to the next sweep or write, which the answer reports as
            # degraded.
            scheduled = self.consolidator.schedule(attribution.key, attribution.session)
            degraded = not scheduled
        response = WriteResponse(accepted=len(turns), scheduled=scheduled, degraded=degraded)
        return response, 202 if scheduled else 200

    async def _check_writable(self) -> None:
        try:
            await asyncio.wait_for(self.longterm.ping(), self.tiers.recall_timeout)
        except TIER_FAILURES as exc:
            log.warning("long-term store check failed", exc_info=True)
            raise StrictFailure("the long-term store does not answer") from exc
        if not self.consolidator.executor.has_room():
            raise StrictFailure("background work cannot be queued now (queue full)")

    # --- reads ----------------------------------------------------------------------------

    async def recall(self, identity: Identity, req: RecallRequest) -> RecallResponse:
        scope = self._scope(identity, req.level, req.include)
        top_k = req.top_k or self.tiers.recall_top_k

        # What an agent injects by itself is the store's policy; a search sees every fact.
        sources = self.tiers.injected if req.purpose == "context" else None

        async def search() -> list[Fact]:
            # A deadline on this task, not ``wait_for``'s task of its own per recall.
            async with asyncio.timeout(self.tiers.recall_timeout):
                return await self.longterm.search(scope, req.query, top_k, sources, _view(req))

        async def long_term() -> tuple[LongTerm, bool]:
            if "long_term" not in req.include:
                return LongTerm(), False
            try:
                facts = await self._timed("long_term", "search", search())
            except TIER_FAILURES:
                log.warning("long-term recall failed", exc_info=True)
                self.metrics.degraded.labels(reason="recall_long_term").inc()
                return LongTerm(), True
            return LongTerm(facts=facts, block=fact_block(facts)), False

        (lt, lt_degraded), conv = await _alongside(
            long_term(), self._conversational(scope, req.include)
        )
        return RecallResponse(
            long_term=lt,
            medium_term=conv.medium_term,
            short_term=conv.short_term,
            degraded=lt_degraded or conv.degraded,
        )

    async def list_scope(self, identity: Identity, req: ListRequest) -> ListResponse:
        scope = self._scope(identity, req.level, req.include)
        if req.cursor is not None:
            try:
                self.longterm.check_cursor(req.cursor)
            except ValueError:
                raise BadRequest(
                    "cursor is not one this service gave out", code="bad_cursor"
                ) from None

        async def long_term() -> tuple[LongTerm, str | None, bool]:
            if "long_term" not in req.include:
                return LongTerm(), None, False
            try:
                facts, next_cursor = await self._timed(
                    "long_term",
                    "list",
                    self.longterm.list_facts(
                        scope, req.limit, req.cursor, View(history=req.history)
                    ),
                )
            except StorageError:
                log.warning("long-term listing failed", exc_info=True)
                self.metrics.degraded.labels(reason="list_long_term").inc()
                return LongTerm(), None, True
            return LongTerm(facts=facts, block=fact_block(facts)), next_cursor, False

        (lt, next_cursor, lt_degraded), conv = await _alongside(
            long_term(), self._conversational(scope, req.include)
        )
        return ListResponse(
            long_term=lt,
            medium_term=conv.medium_term,
            short_term=conv.short_term,
            degraded=lt_degraded or conv.degraded,
            next_cursor=next_cursor,
        )

    async def _conversational(self, scope: Scope, include: list[Tier]) -> Conversational:
        key = scope.key
        wanted: set[Tier] = set(include) & CONVERSATIONAL_TIERS
        if key is None or not wanted or scope.level == "store":
            return EMPTY_CONVERSATION
        try:
            return await self._timed(
                "short_term", "read", self._read_conversation(scope, key, wanted)
            )
        except StorageError:
            log.warning("conversational read failed", exc_info=True)
            self.metrics.degraded.labels(reason="recall_conversation").inc()
            return Conversational(ShortTerm(), MediumTerm(), degraded=True)

    async def _read_conversation(self, scope: Scope, key: str, wanted: set[Tier]) -> Conversational:
        # A principal-bound read sees the session only if that principal wrote to it.
        read = await self.conversation.read_session(
            key,
            scope.principal,
            self.tiers.max_events,
            turns="short_term" in wanted,
            digest="medium_term" in wanted,
        )
        short = ShortTerm()
        medium = MediumTerm()
        if "short_term" in wanted:
            turns = window(read.turns, self.tiers.token_budget, self.tiers.max_events)
            short = ShortTerm(
                window=[WindowTurn(role=t.role, content=t.content, at=t.at) for t in turns]
            )
        if read.digest is not None:
            medium = MediumTerm(summary=read.digest.summary, version=read.digest.version)
        return Conversational(short, medium)

    # --- forget ---------------------------------------------------------------------------

    async def forget(
        self, identity: Identity, req: ForgetRequest, actor: Actor = UNKNOWN_ACTOR
    ) -> ForgetResponse:
        """Erase a scope from every tier; see ``erasure`` for how it wins against the
        background work of that scope. ``degraded`` unless the erasure is final. The
        answer's ``receipt`` is the audit record naming ``actor``, ``signed_receipt`` the
        store's signed account of it (``kaos_memory.receipts``)."""
        scope = self._scope(identity, req.level, None)
        strict = self._mode(req.failure_mode) == "strict"
        try:
            selector = await self._erasure_selector(scope)
        except StorageError:
            log.error("resolving the erased sessions failed", exc_info=True)
            self.metrics.degraded.labels(reason="forget_failed").inc()
            if strict:
                raise StrictFailure("erasure incomplete: conversational tiers") from None
            nothing = ErasureResult(failures=["conversational tiers"])
            signed = await self._signed(scope, nothing)
            return ForgetResponse(forgotten=Forgotten(), degraded=True, signed_receipt=signed)
        result = await self._timed("erasure", "forget", self.eraser.forget(scope, selector, actor))
        signed = await self._signed(scope, result)
        if result.failures or not result.final:
            self.metrics.degraded.labels(reason="forget_failed").inc()
            if strict:
                failures = result.failures or ["not final"]
                raise StrictFailure("erasure incomplete: " + "; ".join(failures))
        erased = result.erased
        log.info(
            "scope forgotten",
            extra={
                "level": scope.level,
                "turns": erased.turns,
                "digests": erased.digests,
                "facts": result.facts,
                "final": result.final,
                "audit": erased.audit_id,
            },
        )
        return ForgetResponse(
            forgotten=Forgotten(
                short_term=erased.turns, medium_term=erased.digests, long_term=result.facts
            ),
            degraded=bool(result.failures) or not result.final,
            receipt=erased.audit_id,
            signed_receipt=signed,
        )

    async def _signed(self, scope: Scope, result: ErasureResult) -> ErasureReceipt | None:
        if self.receipts is None:
            return None
        return await receipt_for(self.receipts, self.conversation, scope, result)

    # --- the audit ------------------------------------------------------------------------

    async def audit(self, req: AuditRequest) -> AuditResponse:
        """One page of the store's audit records (erasures, exports, imports; of
        ``req.action`` only, when given), newest first (admin calls only)."""
        before = None if req.cursor is None else int(req.cursor)
        try:
            entries = await self.conversation.audit(self.group, req.limit + 1, before, req.action)
        except StorageError as exc:
            log.error("reading the audit failed", exc_info=True)
            raise StrictFailure("the conversation store failed") from exc
        page = entries[: req.limit]
        more = len(entries) > req.limit
        return AuditResponse(
            records=[wire_record(e) for e in page],
            next_cursor=str(page[-1].id) if more and page else None,
        )

    async def _erasure_selector(self, scope: Scope) -> ErasureSelector | None:
        """The sessions whose conversational tiers the erasure reaches (None: none)."""
        group = self.group
        if scope.level == "session":
            assert scope.session is not None
            key = conversation_key(group, scope.session, scope.principal)
            if scope.principal is not None and not await self.conversation.is_attributed(
                key, scope.principal
            ):
                return None  # another principal's session: only this principal's facts
            return ErasureSelector(group=group, key=key)
        if scope.level == "agent":
            return ErasureSelector(group=group, principal=scope.principal, agent=scope.agent)
        if scope.level == "user":
            return ErasureSelector(group=group, principal=scope.principal)
        return ErasureSelector(group=group)
