"""The audit trail of what the agent did on whose behalf: every tool call, delegation and
approval decision, one ``AuditEntry`` each, appended in the order the calls started.

An entry carries the digest of the call's arguments (SHA-256 of their canonical JSON,
``canonical_arguments``) always, and the arguments themselves only when the Agent opts in
(``spec.audit.recordArguments``). Writing the trail never fails a run: ``AuditLog.append``
logs a failed write by its error class (never the entry: it may hold arguments) and counts
it, and the call goes on. ``query`` answers the latest matching entries in call order.

The log lives beside the task store (``TASK_STORE_TYPE``): ``memory`` keeps a bounded list
in the process (``MemoryAuditLog``), ``local`` a table of the SQLite file, ``external`` a
table of the PostgreSQL database (``kaos_agent.audit_trail.stores`` builds the one configured).
"""

from __future__ import annotations

import abc
import hashlib
import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

log = logging.getLogger(__name__)

Kind = Literal["tool", "delegation", "approval"]
KINDS: tuple[str, ...] = ("tool", "delegation", "approval")
# The most entries one query answers, and how many it answers when not told.
MAX_QUERY_LIMIT = 10_000
DEFAULT_LIMIT = 1000
# The entries a process keeps under ``TASK_STORE_TYPE=memory`` (the oldest go first).
MEMORY_CAPACITY = 10_000


@dataclass(frozen=True)
class AuditEntry:
    at: float  # epoch seconds the call started (or the decision)
    kind: Kind
    name: str  # tool name, or the peer agent's name
    outcome: str  # ok|failed|error|retry|deferred ; approval: approved|denied|timeout
    task: str | None = None  # A2A task id
    session: str | None = None
    identity: str | None = None  # the calling identity (delegating agent / principal)
    user: str | None = None  # the verified user
    arguments_digest: str | None = None  # sha256 hex of the canonical JSON of the arguments
    arguments: str | None = None  # canonical JSON, only when recordArguments
    duration_ms: float | None = None
    decided_by: str | None = None  # approvals: who decided (user or "timeout")


@dataclass(frozen=True)
class AuditQuery:
    """Which entries a query answers: the latest ``limit`` of ``task`` (any, when None)
    started at or after ``since`` and before ``until``, acting for ``user`` (anyone, when
    None)."""

    task: str | None = None
    since: float | None = None
    until: float | None = None
    limit: int = DEFAULT_LIMIT
    user: str | None = None

    def matches(self, entry: AuditEntry) -> bool:
        return (
            (self.task is None or entry.task == self.task)
            and (self.user is None or entry.user == self.user)
            and (self.since is None or entry.at >= self.since)
            and (self.until is None or entry.at < self.until)
        )


def canonical_arguments(arguments: Any) -> str:
    """The canonical JSON of a call's arguments: keys sorted, no whitespace, UTF-8 text; a
    value JSON cannot carry is written as its ``str``."""
    return json.dumps(
        arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )


def digest_arguments(arguments: Any, *, record: bool) -> tuple[str, str | None]:
    """``(digest, arguments)`` for an entry: the SHA-256 hex of the canonical JSON, and the
    canonical JSON itself only when ``record``."""
    canonical = canonical_arguments(arguments)
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return digest, canonical if record else None


class AuditLog(abc.ABC):
    """The agent's audit trail, shared as far as its task store is."""

    def __init__(self) -> None:
        # Called once per failed write (``kaos_agent_audit_write_failures_total``).
        self.on_failure: Callable[[], None] | None = None

    async def start(self) -> None:  # noqa: B027 - a hook: the log in memory opens nothing
        pass

    async def close(self) -> None:  # noqa: B027 - a hook, as ``start``
        pass

    async def append(self, entry: AuditEntry) -> None:
        """Record ``entry``; never raises: a failure is logged (by class) and counted."""
        try:
            await self.write(entry)
        except Exception as exc:  # noqa: BLE001 - the trail must not fail the call it records
            log.warning(
                "audit write failed",
                extra={"error": type(exc).__name__, "kind": entry.kind},
            )
            if self.on_failure is not None:
                self.on_failure()

    @abc.abstractmethod
    async def write(self, entry: AuditEntry) -> None:
        """Record ``entry``, raising when it could not be (``append`` catches it)."""

    async def query(
        self,
        *,
        task: str | None = None,
        since: float | None = None,
        until: float | None = None,
        limit: int = DEFAULT_LIMIT,
        user: str | None = None,
    ) -> list[AuditEntry]:
        """The latest ``limit`` entries of ``task`` (any, when None) started at or after
        ``since`` and before ``until`` (and, given ``user``, acting for that user), oldest
        first (in call order)."""
        return await self.select(AuditQuery(task, since, until, limit, user))

    @abc.abstractmethod
    async def select(self, query: AuditQuery) -> list[AuditEntry]:
        """What ``query`` answers, each log its own way."""

    @abc.abstractmethod
    async def sweep(self, before: float) -> int:
        """Delete the entries started before ``before``; how many were deleted."""


class MemoryAuditLog(AuditLog):
    """One replica's trail (``TASK_STORE_TYPE=memory``), the latest ``capacity`` entries."""

    def __init__(self, *, capacity: int = MEMORY_CAPACITY) -> None:
        super().__init__()
        self._entries: deque[tuple[int, AuditEntry]] = deque(maxlen=capacity)
        self._seq = 0

    async def write(self, entry: AuditEntry) -> None:
        self._seq += 1
        self._entries.append((self._seq, entry))

    async def select(self, query: AuditQuery) -> list[AuditEntry]:
        found = [(e.at, seq, e) for seq, e in self._entries if query.matches(e)]
        found.sort(key=lambda item: (item[0], item[1]))
        return [e for _, _, e in found[-query.limit :]] if query.limit > 0 else []

    async def sweep(self, before: float) -> int:
        kept = [(seq, e) for seq, e in self._entries if e.at >= before]
        deleted = len(self._entries) - len(kept)
        self._entries = deque(kept, maxlen=self._entries.maxlen)
        return deleted
