"""Recording one call in the audit trail: what ``GuardedToolset`` (every tool call) and the
delegation tools (every delegation) hand it, turned into an ``AuditEntry`` with the run's
verified context (``RunDeps``: task, session, user, the delegating agent).

The entry's ``identity`` is who called: the verified agent that delegated the run, else
the run's principal; ``user`` is the principal the run acts for (under verified user
identity, the user the token proved). Failed writes are counted in
``kaos_agent_audit_write_failures_total``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from kaos_agent.audit.log import AuditEntry, AuditLog, Kind, digest_arguments
from kaos_agent.context import RunDeps


def write_failures_counter(registry: CollectorRegistry) -> Counter:
    return Counter(
        "audit_write_failures",
        "Audit trail entries that could not be written (the call itself went on).",
        namespace="kaos_agent",
        registry=registry,
    )


@dataclass(frozen=True)
class Started:
    """When a call started: the wall clock for the entry, a monotonic one for its duration."""

    at: float
    monotonic: float

    @property
    def duration_ms(self) -> float:
        return round((time.monotonic() - self.monotonic) * 1000.0, 3)


@dataclass(frozen=True)
class Auditor:
    """The agent's audit log, and whether arguments are recorded themselves."""

    log: AuditLog
    record_arguments: bool = False
    clock: Callable[[], float] = field(default=time.time, repr=False)

    def start(self) -> Started:
        return Started(self.clock(), time.monotonic())

    async def call(
        self,
        kind: Kind,
        name: str,
        arguments: Any,
        deps: RunDeps,
        started: Started,
        outcome: str,
    ) -> None:
        """Record one finished call (never raises: ``AuditLog.append``)."""
        digest, recorded = digest_arguments(arguments, record=self.record_arguments)
        await self.log.append(
            AuditEntry(
                at=started.at,
                kind=kind,
                name=name,
                outcome=outcome,
                task=deps.task_id,
                session=deps.session_id,
                identity=deps.caller or deps.principal,
                user=deps.principal,
                arguments_digest=digest,
                arguments=recorded,
                duration_ms=started.duration_ms,
            )
        )
