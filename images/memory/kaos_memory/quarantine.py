"""Quarantined facts, for administrators: list them, release them, erase them (audited).

The long-term store holds back facts whose text reads as an instruction to the agent
(``storage.quarantine``); this is what an administrator does with them. A release or an
erasure is recorded in the audit before it acts (``quarantine_release``,
``quarantine_erase``: the actor, the scope, then how it ended and how many facts), as an
import is, so none goes unaudited: one that cannot be recorded is refused 500
``strict_failure``, and one naming a fact that is not quarantined in the scope acts on none
(404 ``unknown_facts``), its record ``failed``. A record names ids' count, never text.
"""

from __future__ import annotations

import logging
from typing import Literal

from kaos_core.errors import BadRequest, KaosError, StrictFailure
from kaos_core.memory.contract import Level
from kaos_core.memory.quarantine import (
    QuarantineChangeResponse,
    QuarantinedFact,
    QuarantineListRequest,
    QuarantineListResponse,
)
from kaos_core.wire import Identity

from kaos_memory.audit import transfer_ended
from kaos_memory.scope import Posture, Scope, derive_scope
from kaos_memory.storage.audit import Actor, AuditLog, Moved, Transfer, TransferOutcome
from kaos_memory.storage.base import LongTermStore
from kaos_memory.storage.errors import StorageError
from kaos_memory.storage.quarantine import UnknownFacts

audit_log = logging.getLogger("kaos_memory.audit")
log = logging.getLogger(__name__)

Change = Literal["quarantine_release", "quarantine_erase"]


class UnknownFactIds(KaosError):
    status = 404
    code = "unknown_facts"


class Quarantine:
    """The quarantine of one store: its long-term tier and its audit."""

    def __init__(
        self, group: str, posture: Posture, ceiling: Level, longterm: LongTermStore, audit: AuditLog
    ) -> None:
        self.group = group
        self.posture = posture
        self.ceiling = ceiling
        self.longterm = longterm
        self.audit = audit

    def scope(self, identity: Identity, level: Level) -> Scope:
        return derive_scope(
            identity,
            level,
            posture=self.posture,
            ceiling=self.ceiling,
            group=self.group,
            conversational=False,
        )

    async def listing(
        self, identity: Identity, req: QuarantineListRequest
    ) -> QuarantineListResponse:
        scope = self.scope(identity, req.level)
        if req.cursor is not None:
            try:
                self.longterm.check_cursor(req.cursor)
            except ValueError:
                raise BadRequest(
                    "cursor is not one this service gave out", code="bad_cursor"
                ) from None
        try:
            held, next_cursor = await self.longterm.list_quarantined(scope, req.limit, req.cursor)
        except StorageError as exc:
            log.error("listing quarantined facts failed", exc_info=True)
            raise StrictFailure("the long-term store could not be read") from exc
        return QuarantineListResponse(
            facts=[QuarantinedFact(fact=h.fact, reason=h.reason) for h in held],
            next_cursor=next_cursor,
        )

    async def change(
        self, action: Change, identity: Identity, level: Level, ids: list[str], actor: Actor
    ) -> QuarantineChangeResponse:
        """Release or erase the quarantined facts ``ids`` of the scope: all or none."""
        scope = self.scope(identity, level)
        transfer = Transfer(
            action=action,
            actor=actor,
            level=scope.level,
            principal=scope.principal,
            agent=scope.agent,
        )
        try:
            audit_id = await self.audit.record_transfer(self.group, transfer)
        except StorageError as exc:
            log.error("recording the %s in the audit failed", action, exc_info=True)
            raise StrictFailure("the audit could not be written: nothing was changed") from exc
        outcome: TransferOutcome = "failed"
        count = 0
        try:
            if action == "quarantine_release":
                count = await self.longterm.release(scope, ids)
            else:
                count = await self.longterm.erase_quarantined(scope, ids)
            outcome = "complete"
        except UnknownFacts as exc:
            raise UnknownFactIds(
                f"{exc.count} of the ids name no quarantined fact of this scope"
            ) from None
        except StorageError as exc:
            log.error("%s failed", action, exc_info=True)
            raise StrictFailure("the long-term store failed; nothing or part was changed") from exc
        finally:
            await self._ended(audit_id, transfer, outcome, count)
        return QuarantineChangeResponse(facts=count, audit=audit_id)

    async def _ended(
        self, audit_id: int, transfer: Transfer, outcome: TransferOutcome, count: int
    ) -> None:
        await transfer_ended(
            self.audit, self.group, audit_id, transfer, outcome, Moved(facts=count)
        )
