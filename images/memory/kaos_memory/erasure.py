"""Erasure that wins against background work, on every replica and across a restart.

A forget runs four steps:

1. One transaction of the conversation store records the tombstone (scope, time, the
   sessions it reaches, and this replica's ``erase`` lease on it) with its audit record
   (who asked, the rows per tier: ``storage.audit``) and deletes those
   sessions' turns, digests, folds and attribution. From its commit on, no fold work of
   those sessions starts on any replica: the tombstone check in the outbox queries hands
   out nothing of them and refuses to begin an extraction or write a digest. A user-level
   forget of a sealed store (``crypto``) also deletes the principal's data key in this
   transaction, and the KEK destroys it (``_shred``) before step 3 fans out: from then on
   no copy of the principal's text anywhere opens (crypto-shredding).
2. The fence: it waits until no digest or extract lease on those sessions is live. Work
   that was already at the model when the tombstone committed holds such a lease until
   it has ended (a dead replica's lease lapses after the lease TTL), so after the fence no
   model call carrying the erased turns is running or can start.
3. The long-term tier: the scope's facts are deleted and Mem0's history and message
   context (the turns Mem0 quotes as "last messages" in its next extraction prompt) are
   purged for the scope and every erased conversation (by its key: another principal's
   conversation under the same session id keeps its context). Facts or context a racing
   extraction stored before the fence ended are gone with them; the audit record counts
   the facts.
4. The space of the deleted rows is reclaimed and the tombstone becomes final (fold work
   written after the forget goes on). In local mode the reclaim comes first (the SQLite
   files rewritten so no freed page or WAL frame keeps erased text), so a final erasure
   holds no erased byte on disk; one that could not reclaim stays pending for the
   sweeper. In external mode a background ``VACUUM`` follows the final mark.

A replica that dies after step 1 leaves the tombstone pending: its sessions stay fenced,
its lease lapses, and the sweeper of any replica (the first sweep runs at start) takes the
lease and redoes steps 2 to 4, which are idempotent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, field

from kaos_memory.crypto.keyring import Keyring, principal_owner
from kaos_memory.scope import Scope
from kaos_memory.storage.audit import UNKNOWN_ACTOR, Actor
from kaos_memory.storage.base import (
    ConversationStore,
    Erased,
    ErasureSelector,
    LongTermStore,
    Tombstone,
)
from kaos_memory.storage.errors import StorageError

log = logging.getLogger(__name__)

# How often the fence looks at the leases of the erased sessions.
FENCE_POLL_SECONDS = 0.05


@dataclass(frozen=True)
class ErasurePolicy:
    lease_ttl: float
    # The longest the fence waits for work in flight before the erasure answers as not
    # final (the sweeper finishes it later): a live holder's work is bounded by the model
    # timeout, a dead holder's lease lapses after the TTL.
    fence_timeout: float
    # Reclaim the deleted rows' space before answering (local) or in the background.
    reclaim_inline: bool


@dataclass
class ErasureResult:
    erased: Erased = field(default_factory=Erased)
    facts: int = 0
    final: bool = False
    failures: list[str] = field(default_factory=list)
    # The principal's data key was destroyed (crypto-shredding): the receipt says so.
    key_shredded: bool = False


def tombstone_scope(tombstone: Tombstone) -> Scope:
    return Scope(
        level=tombstone.level,  # type: ignore[arg-type]
        group=tombstone.group,
        session=tombstone.session,
        principal=tombstone.principal,
        agent=tombstone.agent,
    )


class Eraser:
    def __init__(
        self,
        *,
        conversation: ConversationStore,
        longterm: LongTermStore,
        policy: ErasurePolicy,
        replica: str,
        keyring: Keyring | None = None,
    ) -> None:
        self.conversation = conversation
        # Set when texts are sealed: a principal's forget shreds its key (``_shred``).
        self.keyring = keyring
        self.longterm = longterm
        self.policy = policy
        self.replica = replica
        self._tasks: set[asyncio.Task[None]] = set()
        self._resuming: set[int] = set()
        self._vacuum: asyncio.Task[None] | None = None
        self._vacuum_again = False

    def _owner(self) -> str:
        return f"{self.replica}/erase-{uuid.uuid4().hex[:8]}"

    # --- the request path ---------------------------------------------------------------------

    async def forget(
        self, scope: Scope, selector: ErasureSelector | None, actor: Actor = UNKNOWN_ACTOR
    ) -> ErasureResult:
        """Erase ``scope`` (and the conversational tiers of the sessions ``selector``
        reaches) for ``actor``, who the audit record names; final when the answer says so."""
        owner = self._owner()
        result = ErasureResult()
        try:
            result.erased = await self.conversation.erase(
                selector, scope, owner, self.policy.lease_ttl, actor
            )
        except StorageError:
            log.error("recording the erasure failed", exc_info=True)
            result.failures.append("conversational tiers")
            # Nothing recorded, nothing fenced: still take the facts away.
            try:
                result.facts = await self.longterm.erase(scope)
            except StorageError:
                log.error("long-term erasure failed", exc_info=True)
                result.failures.append("long-term tier")
            return result
        tombstone = result.erased.tombstone
        assert tombstone is not None
        result.key_shredded = result.erased.key_shredded
        await self._finish(tombstone, owner, result)
        return result

    async def _finish(self, tombstone: Tombstone, owner: str, result: ErasureResult) -> None:
        """Steps 2 to 4 for a recorded erasure whose lease ``owner`` holds."""
        renewer = asyncio.create_task(self._renew(tombstone, owner), name="erase-lease")
        reclaimed = False
        try:
            if not await self._shred(tombstone):
                result.failures.append("key-encryption key")
                return
            try:
                fenced = await self._fence(list(tombstone.keys))
            except StorageError:
                log.error("watching the work in flight failed", exc_info=True)
                fenced = False
            if not fenced:
                result.failures.append("work in flight did not end")
            try:
                result.facts = await self.longterm.erase(tombstone_scope(tombstone), tombstone.keys)
            except StorageError:
                log.error("long-term erasure failed", exc_info=True)
                result.failures.append("long-term tier")
                return
            if result.facts:
                try:
                    await self.conversation.add_erased_facts(tombstone.id, result.facts)
                except StorageError:
                    log.error("counting the erased facts in the audit failed", exc_info=True)
                    result.failures.append("audit record")
            if fenced and self.policy.reclaim_inline:
                # Local mode: the files hold no erased byte before the erasure is final, so
                # "final" (the forget's answer, or the tombstone a reader waits on) means
                # the bytes are gone too. Space not reclaimed now leaves it pending.
                reclaimed = await self._reclaim_now()
                if not reclaimed:
                    result.failures.append("reclaiming erased space")
                    return
            if fenced:
                try:
                    result.final = await self.conversation.finish_erasure(tombstone, owner)
                except StorageError:
                    log.error("marking the erasure final failed", exc_info=True)
                    result.failures.append("conversational tiers")
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
            if not result.final:
                # Left pending for the sweeper of any replica, at once.
                with contextlib.suppress(StorageError):
                    await self.conversation.release_lease(tombstone.lease_key, "erase", owner)
        if not self.policy.reclaim_inline:
            await self._reclaim()  # external mode: VACUUM in the background
        elif not reclaimed:
            await self._reclaim_now()  # best effort; whoever resumes it reclaims again
        log.info(
            "erasure final" if result.final else "erasure pending",
            extra={"erasure": tombstone.id, "sessions": len(tombstone.keys)},
        )

    async def _shred(self, tombstone: Tombstone) -> bool:
        """A principal's forget: its data key, whose row went with the tombstone, is
        destroyed outside the database too (a KMS key) before the long-term deletion fans
        out; False when the KEK could not be reached (the erasure stays pending and is
        resumed). Idempotent, so a resumed erasure does it again."""
        if self.keyring is None or tombstone.level != "user" or tombstone.principal is None:
            return True
        try:
            await self.keyring.shred(principal_owner(tombstone.principal))
        except Exception:  # a KMS refusing or not answering: logged, resumed later
            log.error("destroying the principal's key failed", exc_info=True)
            return False
        return True

    async def _fence(self, keys: list[str]) -> bool:
        """Wait until no digest or extract lease on ``keys`` is live; False on timeout."""
        if not keys:
            return True
        deadline = time.monotonic() + self.policy.fence_timeout
        while await self.conversation.live_leases(keys) > 0:
            if time.monotonic() > deadline:
                log.warning("erasure fence timed out", extra={"sessions": len(keys)})
                return False
            await asyncio.sleep(FENCE_POLL_SECONDS)  # polling the leases, bounded above
        return True

    async def _renew(self, tombstone: Tombstone, owner: str) -> None:
        ttl = self.policy.lease_ttl
        while True:
            await asyncio.sleep(ttl / 3)
            try:
                await self.conversation.renew_lease(tombstone.lease_key, "erase", owner, ttl)
            except StorageError:  # a database blip: try again next period
                log.warning("renewing an erase lease failed", extra={"erasure": tombstone.id})

    # --- retention ------------------------------------------------------------------------------

    async def expire_facts(self, group: str, ids: list[str], actor: Actor) -> ErasureResult:
        """Erase facts past their age by id (vectors, rows and Mem0's history of them), then
        record them (a final store-level erasure whose audit record names ``actor``) and
        reclaim their space. No session is reached, so nothing is fenced; a crash before
        the record leaves the count out of the audit, never a fact in the store."""
        result = ErasureResult()
        if ids:
            try:
                result.facts = await self.longterm.erase_ids(ids)
            except StorageError:
                log.error("erasing expired facts failed", exc_info=True)
                result.failures.append("long-term tier")
                return result
            try:
                audit_id = await self.conversation.record_expiry(group, actor, result.facts)
                result.erased = Erased(audit_id=audit_id)
            except StorageError:
                log.error("recording expired facts in the audit failed", exc_info=True)
                result.failures.append("audit record")
            await self._reclaim()
        result.final = not result.failures
        return result

    # --- residue --------------------------------------------------------------------------------

    async def _reclaim(self) -> None:
        if self.policy.reclaim_inline:
            await self._reclaim_now()
            return
        if self._vacuum is not None and not self._vacuum.done():
            self._vacuum_again = True
            return
        self._vacuum = asyncio.create_task(self._vacuum_loop(), name="erase-vacuum")

    async def _vacuum_loop(self) -> None:
        while True:
            self._vacuum_again = False
            await self._reclaim_now()
            if not self._vacuum_again:
                return

    async def _reclaim_now(self) -> bool:
        """Reclaim both stores' freed space; False when one could not (it is logged)."""
        complete = True
        for name, reclaim in (
            ("conversation", self.conversation.reclaim),
            ("long-term", self.longterm.reclaim),
        ):
            try:
                await reclaim()
            except StorageError:  # the erasure stands; the space is reclaimed later
                log.warning("reclaiming erased space failed", extra={"store": name}, exc_info=True)
                complete = False
        return complete

    # --- the sweeper's part ---------------------------------------------------------------------

    async def resume(self, limit: int = 16) -> int:
        """Take over erasures a dead replica left pending; how many were started."""
        started = 0
        try:
            pending = await self.conversation.pending_erasures(limit)
        except StorageError:
            log.warning("listing pending erasures failed", exc_info=True)
            return 0
        for tombstone in pending:
            if tombstone.id in self._resuming:
                continue
            owner = self._owner()
            try:
                taken = await self.conversation.acquire_lease(
                    tombstone.lease_key, "erase", owner, self.policy.lease_ttl
                )
            except StorageError:
                log.warning("taking over an erasure failed", exc_info=True)
                return started
            if not taken:
                continue
            self._resuming.add(tombstone.id)
            task = asyncio.create_task(self._resume_one(tombstone, owner), name="erase-resume")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            started += 1
        return started

    async def _resume_one(self, tombstone: Tombstone, owner: str) -> None:
        result = ErasureResult()
        try:
            await self._finish(tombstone, owner, result)
        except Exception:
            log.warning(
                "resuming an erasure failed", extra={"erasure": tombstone.id}, exc_info=True
            )
        finally:
            self._resuming.discard(tombstone.id)
        log.info("pending erasure resumed", extra={"erasure": tombstone.id, "final": result.final})

    async def close(self) -> None:
        tasks = list(self._tasks)
        if self._vacuum is not None:
            tasks.append(self._vacuum)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
