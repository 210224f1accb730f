"""One typed interface per storage tier, and the rows that cross it.

``ConversationStore`` owns the two KAOS tiers (the short-term window's turns and the
medium-term digest versions) plus their bookkeeping (the attribution/erasure index and
fold records); one implementation per backend (SQLite, PostgreSQL). ``LongTermStore`` is
the Mem0-backed semantic tier. Constructors do no I/O; ``start`` opens, ``close`` closes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from kaos_core.memory.contract import Fact
from kaos_core.telemetry.genai_metrics import GenAiMetrics

from kaos_memory.scope import Attribution, Scope
from kaos_memory.storage.audit import UNKNOWN_ACTOR, Actor, AuditLog
from kaos_memory.storage.limits import WriteQuota

# Re-exported: the stores name them beside the rest of this interface's rows.
from kaos_memory.storage.portable import StoredDigest as StoredDigest
from kaos_memory.storage.portable import StoredFact as StoredFact
from kaos_memory.storage.portable import StoredSession as StoredSession
from kaos_memory.storage.portable import StoredTurn as StoredTurn
from kaos_memory.storage.quarantine import QuarantineStore
from kaos_memory.storage.tombstones import Erased as Erased
from kaos_memory.storage.tombstones import ErasureSelector as ErasureSelector
from kaos_memory.storage.tombstones import Tombstone as Tombstone

# ``erase``: who finishes a recorded erasure (keyed ``erasure:<id>``, see ``Tombstone``).
LeaseKind = Literal["digest", "extract", "erase"]
# How a fold's extraction ended: facts stored (or none found), the model's answers were
# unusable (its turns stay in the digest), or the attempts ran out.
ExtractionStatus = Literal["done", "unusable", "failed"]


class SessionBound(Exception):
    """A write into a session that belongs to another principal (nothing was written)."""


class ErasedSince(Exception):
    """A write whose conversation was erased after its turns were said (nothing written)."""


@dataclass(frozen=True)
class NewTurn:
    role: str
    content: str
    tokens: int
    # The record id a sealed ``content`` is bound to (None: written in the clear).
    rid: str | None = None
    # A saved fact's origin (``WriteOrigin`` ``saved`` or ``tool``); None: a conversation
    # turn, whose role says who said it.
    source: str | None = None


@dataclass(frozen=True)
class TurnRow:
    seq: int
    role: str
    content: str
    tokens: int
    at: str
    principal: str | None
    agent: str | None
    infer: bool
    # The record id its sealed content is bound to (None: stored in the clear).
    rid: str | None = None
    # As ``NewTurn.source``.
    source: str | None = None


@dataclass(frozen=True)
class ActiveStats:
    """Size of a session's unfolded turns, right after a write."""

    tokens: int
    events: int


@dataclass(frozen=True)
class Appended:
    """What a write did: the window's size after it, and the fold it recorded, if any."""

    stats: ActiveStats
    fold_id: int | None


@dataclass(frozen=True)
class Digest:
    version: int
    summary: str


@dataclass(frozen=True)
class SessionRead:
    """What a recall reads of one session: its window's newest turns (newest first) and
    its latest digest. Empty when the reader's principal never wrote to the session."""

    turns: list[TurnRow]
    digest: Digest | None


@dataclass(frozen=True)
class Fold:
    """A batch of the oldest turns evicted from a session's window, recorded once."""

    id: int
    key: str
    session: str
    turns: list[TurnRow]
    attempts: int = 0
    retry_at: float | None = None
    # The W3C traceparent of the write that recorded the fold, for the span link of the
    # background work on it (None: that write was not traced).
    trace_context: str | None = None


@dataclass(frozen=True)
class View:
    """Which versions of the long-term facts a read sees: the current ones, those true at
    the world time ``as_of``, or every version (``history``)."""

    as_of: datetime | None = None
    history: bool = False


CURRENT = View()


@dataclass(frozen=True)
class FoldTag:
    """Which fold, and which attempt at its extraction, stored a fact (in its metadata)."""

    fold_id: int
    attempt: int


@dataclass(frozen=True)
class PendingSession:
    """A session with fold work in the outbox (a digest or an extraction not done)."""

    key: str
    session: str


@dataclass(frozen=True)
class IdleSession:
    """A session nobody wrote to since ``last_at`` whose window was not flushed since."""

    key: str
    session: str
    last_at: str


@dataclass(frozen=True)
class FoldPolicy:
    """When a session's window folds and how much: the decision a write hands to ``append``.

    The service builds it from its settings; the store applies it to the unfolded turns it
    reads under the session's lock (it never decides on its own).
    """

    trigger_tokens: int
    target_tokens: int
    max_events: int

    def crossed(self, tokens: int, events: int) -> bool:
        """Whether a window of this size must fold."""
        return tokens > self.trigger_tokens or events > self.max_events

    def select(self, sizes_oldest_first: Sequence[tuple[int, int]]) -> int:
        """How many of the oldest unfolded turns to fold (0: the trigger is not crossed).

        ``sizes_oldest_first`` holds ``(seq, tokens)``. The oldest turns go until the rest
        is within the fold target and within half the event cap, so a fold makes room for
        several more writes before the next one.
        """
        total = sum(t for _, t in sizes_oldest_first)
        events = len(sizes_oldest_first)
        if not self.crossed(total, events):
            return 0
        event_target = max(1, self.max_events // 2)
        count = 0
        for _, tokens in sizes_oldest_first:
            if total <= self.target_tokens and events - count <= event_target:
                break
            total -= tokens
            count += 1
        return count


class ConversationStore(AuditLog, Protocol):
    """The conversational tiers' rows, their erasure and the audit (``AuditLog``)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self) -> None: ...

    async def append(
        self,
        attribution: Attribution,
        turns: list[NewTurn],
        infer: bool,
        policy: FoldPolicy,
        quota: WriteQuota | None = None,
        said_at: float | None = None,
    ) -> Appended:
        """Insert turns and their attribution index row in one transaction; when they take
        the window past the fold trigger, record the fold (evict the oldest turns into the
        outbox) in that same transaction. With ``quota``, that transaction first counts the
        write against it and raises ``QuotaExceeded`` (writing nothing) when over. With
        ``said_at`` (epoch seconds), an erasure of the conversation recorded after it
        raises ``ErasedSince`` (writing nothing)."""
        ...

    async def is_attributed(self, key: str, principal: str) -> bool:
        """Whether ``principal`` wrote to the session (the principal-bound read check)."""
        ...

    async def latest_digest(self, key: str) -> Digest | None: ...

    async def read_session(
        self, key: str, principal: str | None, limit: int, *, turns: bool, digest: bool
    ) -> SessionRead:
        """A recall's read of a session in one transaction (one round of the store, not
        three): the principal-bound check (``is_attributed``, when ``principal`` is set),
        then the newest ``limit`` unfolded turns if ``turns``, the latest digest if
        ``digest``."""
        ...

    async def claim_fold(self, key: str, session: str, policy: FoldPolicy) -> Fold | None:
        """Atomically record the oldest unfolded turns as one fold (the outbox entry) if the
        trigger is crossed."""
        ...

    async def flush_session(self, key: str, session: str, idle_since: str) -> Fold | None:
        """Fold every unfolded turn of a session still idle since ``idle_since``; mark it
        flushed (until its next write)."""
        ...

    async def pending_digest_folds(self, key: str) -> list[Fold]:
        """Folds of a session whose turns are not yet in a digest version, oldest first."""
        ...

    async def add_digest(
        self, key: str, summary: str, fold_ids: list[int], retention: int
    ) -> int | None:
        """Append a digest version covering ``fold_ids``; prune beyond ``retention``.

        ``None`` when the folds no longer exist (erased meanwhile) or were already
        digested: nothing is written, so erasure cannot be undone by a late digest.
        """
        ...

    async def next_extraction(self, key: str) -> Fold | None:
        """The session's oldest fold whose extraction is pending."""
        ...

    async def begin_extraction(self, fold: Fold, owner: str) -> int | None:
        """Count an attempt (its number), or None: lease lost or fold no longer pending."""
        ...

    async def finish_extraction(
        self, fold: Fold, owner: str, status: ExtractionStatus
    ) -> Literal["done", "lost", "gone"]:
        """Record the outcome if ``owner`` still holds the session's extract lease."""
        ...

    async def defer(self, fold_ids: list[int], *, base: float, cap: float) -> float:
        """After a failed job: keep the folds pending, but out of the sweeper's hands for
        a delay doubling per failure from ``base`` up to ``cap`` seconds; the delay set."""
        ...

    async def acquire_lease(self, key: str, kind: LeaseKind, owner: str, ttl: float) -> bool: ...

    async def renew_lease(self, key: str, kind: LeaseKind, owner: str, ttl: float) -> bool: ...

    async def release_lease(self, key: str, kind: LeaseKind, owner: str) -> None: ...

    async def release_all_leases(self) -> int: ...

    async def outbox(self, limit: int) -> list[PendingSession]:
        """Sessions with pending fold work and no live lease."""
        ...

    async def outbox_depth(self) -> int: ...

    async def idle_sessions(self, idle_since: str, limit: int) -> list[IdleSession]: ...

    async def erase(
        self,
        selector: ErasureSelector | None,
        scope: Scope,
        owner: str,
        ttl: float,
        actor: Actor = UNKNOWN_ACTOR,
    ) -> Erased:
        """Record the erasure of ``scope`` (a tombstone, with ``owner`` holding its
        ``erase`` lease, and its audit record naming ``actor``) and delete the
        conversational rows of the sessions ``selector`` reaches (none for ``None``), in
        one transaction. Fold leases are kept: they show which work is still in flight on
        those sessions."""
        ...

    async def add_erased_facts(self, erasure_id: int, facts: int) -> None:
        """Add the facts an erasure deleted to its audit record."""
        ...

    async def receipt_signing_key(self, group: str, candidate: str) -> str:
        """The group's stored receipt signing key, storing ``candidate`` if there is none."""
        ...

    async def live_leases(self, keys: list[str]) -> int:
        """How many digest or extract leases on ``keys`` are held and not expired."""
        ...

    async def finish_erasure(self, tombstone: Tombstone, owner: str) -> bool:
        """Mark the erasure final if ``owner`` still holds its lease; release the lease."""
        ...

    async def pending_erasures(self, limit: int) -> list[Tombstone]:
        """Erasures not final whose ``erase`` lease nobody holds (a holder died)."""
        ...

    async def sessions_idle_since(self, group: str, before: str, limit: int) -> list[IdleSession]:
        """Up to ``limit`` sessions of ``group`` whose last write is before ``before`` (UTC
        ISO), longest idle first, flushed or not: retention's selection."""
        ...

    async def record_expiry(self, group: str, actor: Actor, facts: int) -> int:
        """Record facts retention deleted by age as a final erasure at the store level, with
        its audit record naming ``actor``; the audit record's id."""
        ...

    async def prune_write_rates(self) -> int:
        """Drop the write-rate counters of minutes already past; how many."""
        ...

    async def reclaim(self) -> None:
        """Make deleted rows unreadable in the database files where the backend can
        (SQLite: checkpoint and truncate the write-ahead log; PostgreSQL: vacuum)."""
        ...

    async def export_sessions(
        self, selector: ErasureSelector, after: str | None, limit: int
    ) -> list[StoredSession]:
        """Up to ``limit`` sessions ``selector`` reaches (as an erasure would), in key
        order after the key ``after``: an export's pages."""
        ...

    async def export_turns(
        self, session: StoredSession, selector: ErasureSelector, after: int | None, limit: int
    ) -> tuple[list[StoredTurn], int | None]:
        """A page of a session's turns in write order after seq ``after``, only those
        attributed to ``selector``'s principal and agent where it names them (at most
        ``limit``; a sealed turn whose key was shredded reads as erased), and the seq the
        next page starts after (None: this was the last)."""
        ...

    async def export_digests(self, session: StoredSession) -> list[StoredDigest]:
        """A session's kept digest versions, oldest first."""
        ...

    async def session_principals(self, key: str) -> set[str]:
        """The principals a session belongs to (none, or the one that wrote first)."""
        ...

    async def import_session(
        self,
        group: str,
        session: str,
        principal: str | None,
        turns: list[StoredTurn],
        digests: list[StoredDigest],
    ) -> tuple[int, int]:
        """Store imported turns of ``principal``'s session (``conversation_key``; folded
        ones under a fold whose work is done, so no model runs on them again) and the
        digest versions the session does not have yet, with their attribution rows, in one
        transaction; the turns and digests written.
        ``SessionBound`` when the session belongs to another principal (nothing written)."""
        ...


class LongTermStore(QuarantineStore, Protocol):
    def measure_with(self, metrics: GenAiMetrics) -> None:
        """Record the duration and token usage of the store's model calls in ``metrics``
        (the app's); called before ``start``."""
        ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def ping(self) -> None: ...

    async def add(
        self, turns: list[TurnRow], attribution: Attribution, infer: bool, tag: FoldTag
    ) -> list[str]:
        """Hand one fold's turns to Mem0 (extraction when ``infer``); the ids of stored
        facts, each tagged with the fold and attempt."""
        ...

    async def erase_fold(self, group: str, session: str, fold_id: int) -> int:
        """Delete the facts any attempt at extracting fold ``fold_id`` stored."""
        ...

    async def search(
        self,
        scope: Scope,
        query: str,
        top_k: int,
        sources: frozenset[str] | None = None,
        view: View = CURRENT,
    ) -> list[Fact]:
        """The scope's ``top_k`` facts nearest ``query`` among those ``view`` sees; only
        facts of ``sources`` (their provenance's) when given."""
        ...

    async def list_facts(
        self, scope: Scope, limit: int, cursor: str | None, view: View = CURRENT
    ) -> tuple[list[Fact], str | None]:
        """One page of the scope's facts ``view`` sees, in ``(created_at, id)`` order, and
        the next cursor."""
        ...

    async def erase(self, scope: Scope, keys: tuple[str, ...] = ()) -> int:
        """Delete every fact of the scope and purge their text from Mem0's history, and
        Mem0's message context of the scope and of the conversations ``keys`` names
        (``conversation_key``: a session id with its principal, not every principal's)."""
        ...

    async def reclaim(self) -> None:
        """Make deleted facts unreadable in the vector store's files where it can."""
        ...

    def check_cursor(self, cursor: str) -> None:
        """``ValueError`` unless ``cursor`` is one ``list_facts`` gave out."""
        ...

    async def facts_created_before(self, group: str, before: str, limit: int) -> list[str]:
        """Ids of up to ``limit`` of ``group``'s facts created before ``before`` (UTC ISO),
        oldest first: retention's selection."""
        ...

    async def count_facts(self, group: str, principal: str) -> int:
        """How many facts ``principal`` holds in ``group`` (the facts quota)."""
        ...

    def held_principals(self) -> tuple[int, int]:
        """Principals whose facts this replica holds for their searches (the per-principal
        vector cache, ``mem0.cache``), and principals being loaded or waiting to be."""
        ...

    async def erase_ids(self, ids: list[str]) -> int: ...

    async def export_facts(
        self, scope: Scope, limit: int, cursor: str | None
    ) -> tuple[list[StoredFact], str | None]:
        """One page of the scope's facts as ``list_facts`` orders them, with every field an
        export carries, and the next cursor."""
        ...

    async def import_facts(self, facts: list[StoredFact]) -> int:
        """Store facts under ids derived from theirs and their group (a fact imported twice
        is stored once), embedded by this store's embedder; how many were new."""
        ...
