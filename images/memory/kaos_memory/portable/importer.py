"""An import: every line checked first, then written; twice the same file stores it once.

``check_lines`` reads the body in chunks into a spool file while it parses every line with
the format's models, so a malformed line is refused (with its number) before anything is
written, and the body is never held in memory. ``write_records`` then reads the spool
again and writes through the stores:

- turns and digest versions per session, each batch in one transaction of the
  conversation store; a turn the session already holds (same role, text, time and
  attribution, counted with multiplicity) is not written again, a digest version the
  session already has is kept;
- facts through the long-term store, which derives their ids from the source ids and the
  target group and embeds them with the target's embedder: the file carries no vectors,
  so a file from a store of another embedding model is re-embedded by construction.

A session id is each principal's own: records are grouped by their conversation, the
session id with the record's principal (alice's "alice-1" and bob's "alice-1" are two).
Before the first write, every conversation the file names is checked against the target's
session ownership (a session is one principal's), so that refusal too writes nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from collections.abc import AsyncIterable, Iterator
from dataclasses import dataclass, field
from typing import IO

from kaos_core.errors import BadRequest, KaosError
from kaos_core.http.body import decode_json, validation_message
from kaos_core.memory.portable import (
    LINES,
    DigestRecord,
    FactRecord,
    Header,
    TurnRecord,
)
from pydantic import ValidationError

from kaos_memory.scope import conversation_key
from kaos_memory.storage.base import (
    ConversationStore,
    ErasureSelector,
    LongTermStore,
    StoredDigest,
    StoredFact,
    StoredSession,
    StoredTurn,
)

MAX_LINE_BYTES = 4 * 1024 * 1024
BATCH = 200

Record = TurnRecord | DigestRecord | FactRecord
Line = Header | Record


class InvalidLine(BadRequest):
    """A line (or a Mem0 dump's result) that is not a record: the import writes nothing."""

    def __init__(self, number: int, problem: str, *, unit: str = "line") -> None:
        super().__init__(f"{unit} {number}: {problem}; nothing was imported", code="invalid_line")
        self.line = number


class SessionConflict(KaosError):
    status = 409
    code = "session_bound"


# A conversation as records name it: the session id and whose session it is.
Conversation = tuple[str, str | None]


@dataclass
class Plan:
    """What the checked file holds: its header, its conversations, its facts."""

    header: Header | None = None
    sessions: set[Conversation] = field(default_factory=set)
    records: int = 0
    facts: int = 0


@dataclass
class Imported:
    turns: int = 0
    digests: int = 0
    facts: int = 0
    skipped: int = 0


def parse(number: int, raw: bytes) -> Line:
    try:
        return LINES.validate_python(decode_json(raw))
    except BadRequest as exc:
        raise InvalidLine(number, exc.message) from None
    except ValidationError as exc:
        raise InvalidLine(number, validation_message(exc)) from None


def check(number: int, line: Line, plan: Plan, *, facts_allowed: bool) -> None:
    """One parsed line against the file so far (the header first, facts only where the
    store has a long-term tier)."""
    if isinstance(line, Header):
        if number != 1 or plan.header is not None:
            raise InvalidLine(number, "the header must be the first line, and only it")
        plan.header = line
        return
    if plan.header is None:
        raise InvalidLine(number, "the first line must be the header")
    plan.records += 1
    if isinstance(line, FactRecord):
        if not facts_allowed:
            raise InvalidLine(number, "this store has no long-term tier for facts")
        plan.facts += 1
    else:
        plan.sessions.add((line.session, line.principal))


async def check_lines(
    chunks: AsyncIterable[bytes], spool: IO[bytes], *, facts_allowed: bool
) -> Plan:
    """Parse and check every line of ``chunks``, copying them into ``spool``."""
    plan = Plan()
    number = 0
    pending = b""
    async for chunk in chunks:
        spool.write(chunk)
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            number += 1
            _one(number, raw, plan, facts_allowed)
        if len(pending) > MAX_LINE_BYTES:
            raise InvalidLine(number + 1, f"longer than {MAX_LINE_BYTES} bytes")
    if pending:
        number += 1
        _one(number, pending, plan, facts_allowed)
    if plan.header is None:
        raise InvalidLine(max(number, 1), "the file has no header line")
    return plan


def _one(number: int, raw: bytes, plan: Plan, facts_allowed: bool) -> None:
    if len(raw) > MAX_LINE_BYTES:
        raise InvalidLine(number, f"longer than {MAX_LINE_BYTES} bytes")
    if raw.strip():
        check(number, parse(number, raw), plan, facts_allowed=facts_allowed)


def spooled_records(spool: IO[bytes]) -> Iterator[Record]:
    """The records of a checked spool, in file order (the header left out)."""
    spool.seek(0)
    for number, raw in enumerate(spool, start=1):
        if raw.strip():
            line = parse(number, raw)
            if not isinstance(line, Header):
                yield line


def _turn_key(t: StoredTurn) -> bytes:
    """What makes two turns of a session the same turn, as a digest (a session's turns
    are counted, not held)."""
    same = json.dumps([t.role, t.content, t.at, t.principal, t.agent]).encode()
    return hashlib.sha256(same).digest()


def stored_turn(record: TurnRecord) -> StoredTurn:
    return StoredTurn(
        session=record.session,
        role=record.role,
        content=record.text,
        tokens=record.tokens,
        at=record.at,
        principal=record.principal,
        agent=record.agent,
        infer=record.infer,
        folded=record.folded,
        source=record.source,
    )


def stored_fact(group: str, record: FactRecord) -> StoredFact:
    return StoredFact(
        id=record.id,
        text=record.text,
        group=group,
        session=record.session,
        principal=record.principal,
        agent=record.agent,
        created_at=record.created_at,
        updated_at=record.updated_at,
        metadata=dict(record.metadata),
    )


class Writer:
    """The write phase: records in file order, batched per session and for facts."""

    def __init__(
        self, conversation: ConversationStore, longterm: LongTermStore, group: str
    ) -> None:
        self.conversation = conversation
        self.longterm = longterm
        self.group = group
        self.done = Imported()
        self._session: Conversation | None = None
        self._held: Counter[bytes] = Counter()
        self._turns: list[StoredTurn] = []
        self._digests: list[StoredDigest] = []
        self._facts: list[StoredFact] = []

    async def check_owners(self, plan: Plan) -> None:
        for session, principal in sorted(plan.sessions, key=lambda c: (c[0], c[1] or "")):
            owners = await self.conversation.session_principals(
                conversation_key(self.group, session, principal)
            )
            if owners and principal not in owners:
                raise SessionConflict(
                    f"session {session!r} belongs to another principal in this store;"
                    " nothing was imported"
                )

    async def add(self, record: Record) -> None:
        if isinstance(record, FactRecord):
            self._facts.append(stored_fact(self.group, record))
            if len(self._facts) >= BATCH:
                await self._flush_facts()
            return
        conversation = (record.session, record.principal)
        if conversation != self._session:
            await self._flush_session()
            await self._open(conversation)
        if isinstance(record, TurnRecord):
            turn = stored_turn(record)
            key = _turn_key(turn)
            # Counted with multiplicity: a session may hold the same turn twice.
            if self._held[key] > 0:
                self._held[key] -= 1
                self.done.skipped += 1
            else:
                self._turns.append(turn)
        else:
            self._digests.append(
                StoredDigest(record.session, record.version, record.text, record.at)
            )
        if len(self._turns) + len(self._digests) >= BATCH:
            await self._flush_session()

    async def _open(self, conversation: Conversation) -> None:
        """What the target already holds of the conversation's turns."""
        self._session = conversation
        self._held = Counter()
        session, principal = conversation
        ref = StoredSession(conversation_key(self.group, session, principal), session, principal)
        everything = ErasureSelector(group=self.group)
        after: int | None = None
        while True:
            page, after = await self.conversation.export_turns(ref, everything, after, BATCH)
            self._held.update(_turn_key(t) for t in page)
            if after is None:
                break

    async def _flush_session(self) -> None:
        if self._session is None or not (self._turns or self._digests):
            return
        turns, digests = self._turns, self._digests
        self._turns, self._digests = [], []
        session, principal = self._session
        written_turns, written_digests = await self.conversation.import_session(
            self.group, session, principal, turns, digests
        )
        self.done.turns += written_turns
        self.done.digests += written_digests
        self.done.skipped += len(digests) - written_digests

    async def _flush_facts(self) -> None:
        facts, self._facts = self._facts, []
        if facts:
            written = await self.longterm.import_facts(facts)
            self.done.facts += written
            self.done.skipped += len(facts) - written

    async def finish(self) -> Imported:
        await self._flush_session()
        await self._flush_facts()
        return dataclasses.replace(self.done)
