"""``ConversationStore`` over any ``Dialect``: the concern modules behind one async boundary.

Every public call is one hop to a small thread pool (one thread for SQLite, whose file has
a single writer; a few for PostgreSQL), where one transaction runs one of the plain
functions of ``window``, ``folds``, ``leases`` or ``erasure``; the event loop never blocks
on the database. The clock is read once per call, when its transaction begins. Two
exceptions: a recall's read of a session on a dialect that reads on the event loop
(``LoopReads``: PostgreSQL on its async pool, SQLite on a read-only connection), and a
window append on one that writes there while its write lock is free (``LoopWrites``:
SQLite), which need no thread at all.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Concatenate, ParamSpec, TypeVar

from kaos_memory.clock import Clock, wall_clock
from kaos_memory.crypto.kek import KeyEncryptionKey, KeyUnreadable
from kaos_memory.crypto.keyring import DataKey, KeyGone, Keyring, StoredKey, owner_of
from kaos_memory.scope import Attribution, Scope, conversation_key
from kaos_memory.storage.audit import (
    UNKNOWN_ACTOR,
    Actor,
    AuditAction,
    AuditEntry,
    Moved,
    Transfer,
    TransferOutcome,
)
from kaos_memory.storage.base import (
    Appended,
    Digest,
    Erased,
    ErasureSelector,
    ExtractionStatus,
    Fold,
    FoldPolicy,
    IdleSession,
    LeaseKind,
    NewTurn,
    PendingSession,
    SessionRead,
    StoredDigest,
    StoredSession,
    StoredTurn,
    Tombstone,
)
from kaos_memory.storage.errors import StorageError, StorageUnavailable
from kaos_memory.storage.limits import WriteQuota
from kaos_memory.storage.sql import (
    audit,
    erasure,
    folds,
    keys,
    leases,
    portable,
    receipt_keys,
    rekey,
    schema,
    sealing,
    window,
)
from kaos_memory.storage.sql import retention as retention_sql
from kaos_memory.storage.sql.dialect import Dialect, LoopReads, LoopWrites, Tx, WriterBusy
from kaos_memory.storage.sql.errors import wrap
from kaos_memory.storage.sql.folds import ExtractionOutcome
from kaos_memory.storage.sql.loop_writer import LoopWriter

P = ParamSpec("P")
T = TypeVar("T")


def _ping(tx: Tx) -> None:
    tx.one("SELECT 1")


async def _wrapped(work: Awaitable[T]) -> T:
    """``work``'s result; the one edge where driver errors become the storage family
    (``wrap``)."""
    try:
        return await work
    except Exception as exc:
        wrapped = wrap(exc)
        if wrapped is None:
            raise
        raise wrapped from exc


async def _key_for(ring: Keyring, owner: str) -> DataKey:
    """The owner's key; a KEK that cannot unwrap it is the store being unavailable (a
    configuration to fix), never a reason to write in the clear or under another key."""
    try:
        return await ring.key_for(owner)
    except KeyUnreadable as exc:
        raise StorageUnavailable("the owner's data key does not unwrap") from exc


class SqlConversationStore:
    def __init__(self, dialect: Dialect, *, clock: Clock = wall_clock) -> None:
        self._db = dialect
        self._clock = clock
        self._pool: ThreadPoolExecutor | None = None
        # Hops sent to the thread and not ended (``_run_short`` writes on the loop only at 0).
        self._hops = 0
        # Known once: a runtime protocol check costs more than the read it would route.
        self._loop_reads = dialect if isinstance(dialect, LoopReads) else None
        self._loop_writer = (
            LoopWriter(dialect, self._hop, clock) if isinstance(dialect, LoopWrites) else None
        )
        # Set: every text is sealed under its owner's key (``encrypt``).
        self.keyring: Keyring | None = None

    def encrypt(self, group: str, kek: KeyEncryptionKey, capacity: int) -> Keyring:
        """Seal every text from now on under per-owner keys of ``group`` wrapped by ``kek``,
        in this store's key table; the keyring (the long-term tier seals with it too).
        Before ``start``."""
        self.keyring = Keyring(group, self, kek, capacity=capacity)
        return self.keyring

    def _in_transaction(
        self, fn: Callable[Concatenate[Tx, P], T], /, *a: P.args, **k: P.kwargs
    ) -> T:
        with self._db.transaction() as cur:
            return fn(Tx(cur, self._db, self._clock()), *a, **k)

    async def _hop(self, fn: Callable[[], T]) -> T:
        if self._pool is None:
            raise RuntimeError("conversation store is not started")
        # In the caller's context, so the active span is the one a fold row records.
        ctx = contextvars.copy_context()
        self._hops += 1
        try:
            return await _wrapped(
                asyncio.get_running_loop().run_in_executor(self._pool, ctx.run, fn)
            )
        finally:
            self._hops -= 1

    async def _run(self, fn: Callable[Concatenate[Tx, P], T], /, *a: P.args, **k: P.kwargs) -> T:
        """Run ``fn(tx, ...)`` in one transaction on the store's thread pool."""
        return await self._hop(functools.partial(self._in_transaction, fn, *a, **k))

    async def _run_short(
        self, fn: Callable[Concatenate[Tx, P], T], /, *a: P.args, **k: P.kwargs
    ) -> T:
        """``_run`` for a transaction of a few indexed statements (a window append): on the
        event loop when the dialect writes there, the store's thread has nothing to do and
        the write lock is free, sparing the hop to the thread and back; else on the thread,
        in line. So a write never overtakes work sent to the thread before it (a forget),
        and the thread never waits for the loop's connection: a loop transaction ends
        before the loop can send the thread anything."""
        if self._loop_writer is not None and self._pool is not None and not self._hops:
            try:
                return await _wrapped(self._loop_writer.run(fn, *a, **k))
            except WriterBusy:
                pass
        return await self._run(fn, *a, **k)

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        self._pool = ThreadPoolExecutor(
            max_workers=self._db.threads, thread_name_prefix="kaos-conversation"
        )
        await self._hop(self._db.open)
        await self._run(schema.migrate)
        if self.keyring is not None:
            self.keyring.start()
        await self._rekey()
        if self._loop_reads is not None:
            await _wrapped(self._loop_reads.open_async())

    async def _rekey(self) -> None:
        """Move the sessions ``rekey`` lists to their principal's key, before any answer."""
        ring = self.keyring
        after = ""
        while found := await self._run(rekey.pending, after, 100):
            after = found[-1]
            for old in found:
                for _ in range(3):
                    move = await self._run(rekey.plan, old, ring is not None)
                    if move is None:
                        break
                    if ring is not None:
                        await rekey.reseal(ring, move)
                    try:
                        await self._run(rekey.apply, move, ring is not None)
                        break
                    except rekey.Changed:
                        continue  # written to meanwhile: read it again

    async def close(self) -> None:
        if self._pool is None:
            return
        try:
            if self.keyring is not None:
                await self.keyring.close()
            if self._loop_writer is not None:
                await self._loop_writer.settled()
            if self._loop_reads is not None:
                await self._loop_reads.close_async()
            await self._hop(self._db.close)
        finally:
            self._pool.shutdown(wait=False)
            self._pool = None

    async def ping(self) -> None:
        await self._run(_ping)

    # --- the window -----------------------------------------------------------------------

    async def append(
        self,
        attribution: Attribution,
        turns: list[NewTurn],
        infer: bool,
        policy: FoldPolicy,
        quota: WriteQuota | None = None,
        said_at: float | None = None,
    ) -> Appended:
        ring = self.keyring
        if ring is None:
            return await self._run_short(
                window.append, attribution, turns, infer, policy, quota, None, said_at
            )
        owner = owner_of(attribution.principal, attribution.agent)
        for _ in range(3):
            data_key = await _key_for(ring, owner)
            sealed = sealing.seal_turns(ring, data_key, attribution.key, turns)
            try:
                return await self._run_short(
                    window.append,
                    attribution,
                    sealed,
                    infer,
                    policy,
                    quota,
                    data_key.id.hex(),
                    said_at,
                )
            except KeyGone:
                ring.evict(owner)  # shredded by a forget meanwhile: the owner's new key
        raise StorageError("the owner's data key keeps disappearing")

    async def is_attributed(self, key: str, principal: str) -> bool:
        return await self._run(window.is_attributed, key, principal)

    async def latest_digest(self, key: str) -> Digest | None:
        digest = await self._run(window.latest_digest, key)
        if self.keyring is None:
            return digest
        return await sealing.open_digest(self.keyring, key, digest)

    async def read_session(
        self, key: str, principal: str | None, limit: int, *, turns: bool, digest: bool
    ) -> SessionRead:
        statements = window.session_statements(key, principal, limit, turns=turns, digest=digest)

        if self._loop_reads is not None:
            if self._pool is None:
                raise RuntimeError("conversation store is not started")
            results = await _wrapped(self._loop_reads.read_async(statements))
            if self.keyring is not None:
                return await sealing.read_rows(
                    self.keyring, key, results, principal, turns=turns, digest=digest
                )
            return window.session_read(results, principal, turns=turns, digest=digest)
        if self.keyring is not None:
            rows = await self._hop(functools.partial(self._db.read, statements))
            return await sealing.read_rows(
                self.keyring, key, rows, principal, turns=turns, digest=digest
            )

        def read() -> SessionRead:
            results = self._db.read(statements)
            return window.session_read(results, principal, turns=turns, digest=digest)

        return await self._hop(read)

    async def idle_sessions(self, idle_since: str, limit: int) -> list[IdleSession]:
        return await self._run(window.idle_sessions, idle_since, limit)

    # --- the outbox -----------------------------------------------------------------------

    async def _opened(self, found: list[Fold]) -> list[Fold]:
        if self.keyring is None or not found:
            return found
        return await sealing.open_folds(self.keyring, found)

    async def _opened_one(self, found: Fold | None) -> Fold | None:
        return None if found is None else (await self._opened([found]))[0]

    async def claim_fold(self, key: str, session: str, policy: FoldPolicy) -> Fold | None:
        return await self._opened_one(await self._run(folds.claim_fold, key, session, policy))

    async def flush_session(self, key: str, session: str, idle_since: str) -> Fold | None:
        found = await self._run(folds.flush_session, key, session, idle_since)
        return await self._opened_one(found)

    async def pending_digest_folds(self, key: str) -> list[Fold]:
        return await self._opened(await self._run(folds.pending_digest_folds, key))

    async def add_digest(
        self, key: str, summary: str, fold_ids: list[int], retention: int
    ) -> int | None:
        ring = self.keyring
        if ring is None:
            return await self._run(folds.add_digest, key, summary, fold_ids, retention)
        data_key = await _key_for(ring, owner_of(*await self._run(window.session_owner, key)))

        def sealed(version: int) -> str:
            return data_key.seal(summary, sealing.digest_record(key, version))

        return await self._run(folds.add_digest, key, sealed, fold_ids, retention)

    async def next_extraction(self, key: str) -> Fold | None:
        return await self._opened_one(await self._run(folds.next_extraction, key))

    async def begin_extraction(self, fold: Fold, owner: str) -> int | None:
        return await self._run(folds.begin_extraction, fold, owner)

    async def finish_extraction(
        self, fold: Fold, owner: str, status: ExtractionStatus
    ) -> ExtractionOutcome:
        return await self._run(folds.finish_extraction, fold, owner, status)

    async def defer(self, fold_ids: list[int], *, base: float, cap: float) -> float:
        return await self._run(folds.defer, fold_ids, base, cap)

    async def outbox(self, limit: int) -> list[PendingSession]:
        return await self._run(folds.outbox, limit)

    async def outbox_depth(self) -> int:
        return await self._run(folds.outbox_depth)

    # --- leases ---------------------------------------------------------------------------

    async def acquire_lease(self, key: str, kind: LeaseKind, owner: str, ttl: float) -> bool:
        return await self._run(leases.acquire, key, kind, owner, ttl)

    async def renew_lease(self, key: str, kind: LeaseKind, owner: str, ttl: float) -> bool:
        return await self._run(leases.renew, key, kind, owner, ttl)

    async def release_lease(self, key: str, kind: LeaseKind, owner: str) -> None:
        await self._run(leases.release, key, kind, owner)

    async def release_all_leases(self) -> int:
        """Drop every lease: only for a single-writer store whose previous process is gone."""
        return await self._run(leases.release_all)

    # --- erasure --------------------------------------------------------------------------

    async def erase(
        self,
        selector: ErasureSelector | None,
        scope: Scope,
        owner: str,
        ttl: float,
        actor: Actor = UNKNOWN_ACTOR,
    ) -> Erased:
        return await self._run(erasure.erase, selector, scope, owner, ttl, actor)

    async def add_erased_facts(self, erasure_id: int, facts: int) -> None:
        await self._run(audit.add_long_term, erasure_id, facts)

    async def audit(
        self, group: str, limit: int, before: int | None, action: AuditAction | None = None
    ) -> list[AuditEntry]:
        return await self._run(audit.entries, group, limit, before, action)

    async def add_receipt(self, audit_id: int, receipt: str) -> None:
        await self._run(audit.add_receipt, audit_id, receipt)

    async def record_transfer(self, group: str, transfer: Transfer) -> int:
        return await self._run(audit.record_transfer, group, transfer)

    async def update_transfer(self, audit_id: int, outcome: TransferOutcome, moved: Moved) -> None:
        await self._run(audit.update_transfer, audit_id, outcome, moved)

    async def receipt_signing_key(self, group: str, candidate: str) -> str:
        return await self._run(receipt_keys.signing_key, group, candidate)

    async def live_leases(self, keys: list[str]) -> int:
        return await self._run(erasure.live_leases, keys)

    async def finish_erasure(self, tombstone: Tombstone, owner: str) -> bool:
        return await self._run(erasure.finish_erasure, tombstone, owner)

    async def pending_erasures(self, limit: int) -> list[Tombstone]:
        return await self._run(erasure.pending_erasures, limit)

    # --- retention and quotas (``kaos_memory.retention``, ``kaos_memory.quota``) ----------

    async def sessions_idle_since(self, group: str, before: str, limit: int) -> list[IdleSession]:
        return await self._run(retention_sql.sessions_idle_since, group, before, limit)

    async def record_expiry(self, group: str, actor: Actor, facts: int) -> int:
        return await self._run(retention_sql.record_expiry, group, actor, facts)

    async def prune_write_rates(self) -> int:
        return await self._run(retention_sql.prune_write_rates)

    async def reclaim(self) -> None:
        await self._hop(self._db.reclaim)

    # --- the key table (``crypto.keyring.KeyTable``) ---------------------------------------

    async def find_key(self, group: str, owner: str) -> StoredKey | None:
        return await self._run(keys.find, group, owner)

    async def load_key(self, key_id: str) -> StoredKey | None:
        return await self._run(keys.load, key_id)

    async def insert_key(self, key: StoredKey) -> StoredKey:
        return await self._run(keys.insert, key)

    async def delete_key(self, group: str, owner: str) -> int:
        return await self._run(keys.delete, group, owner)

    # --- export and import (``kaos_memory.portable``) -------------------------------------

    async def export_sessions(
        self, selector: ErasureSelector, after: str | None, limit: int
    ) -> list[StoredSession]:
        return await self._run(portable.sessions, selector, after, limit)

    async def export_turns(
        self, session: StoredSession, selector: ErasureSelector, after: int | None, limit: int
    ) -> tuple[list[StoredTurn], int | None]:
        found = await self._run(portable.turns, session, selector, after, limit)
        # Where the next page starts, read before sealed turns whose key is gone drop out.
        following = found[-1].seq if len(found) == limit else None
        if self.keyring is not None and found:
            found = await portable.opened_turns(self.keyring, session.key, found)
        return found, following

    async def export_digests(self, session: StoredSession) -> list[StoredDigest]:
        found = await self._run(portable.digests, session)
        if self.keyring is None:
            return found
        return await portable.opened_digests(self.keyring, session.key, found)

    async def session_principals(self, key: str) -> set[str]:
        return await self._run(portable.principals, key)

    async def import_session(
        self,
        group: str,
        session: str,
        principal: str | None,
        turns: list[StoredTurn],
        digests: list[StoredDigest],
    ) -> tuple[int, int]:
        key = conversation_key(group, session, principal)
        ring = self.keyring
        if ring is None:
            return await self._run(portable.import_session, key, group, session, turns, digests)
        owner = await self._run(window.session_owner, key)
        if owner == (None, None):
            # A new session: its owner is its turns' (or, digests only, its principal's).
            owner = (turns[0].principal, turns[0].agent) if turns else (principal, None)
        for _ in range(3):
            sealed = await portable.sealed(ring, key, turns, digests, owner)
            try:
                return await self._run(portable.import_session, key, group, session, *sealed)
            except KeyGone:
                for t in turns:
                    ring.evict(owner_of(t.principal, t.agent))
        raise StorageError("the owner's data key keeps disappearing")
