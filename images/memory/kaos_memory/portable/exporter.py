"""An export: a scope's memory as lines of the portable format, read page by page.

The scope is filtered by the stores (the attribution index and the turns' own attribution
for the conversational tiers, the long-term filter for facts), never by the reader, so a
principal's export reads no row of anyone else. Pages are bounded: memory use does not
grow with the store, only with a page (and one session's digest versions, which the
digest retention bounds).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from kaos_core.memory.portable import (
    DigestRecord,
    Embedding,
    ExportScope,
    FactRecord,
    Header,
    TurnRecord,
    dump_line,
)

from kaos_memory.scope import Scope
from kaos_memory.storage.base import (
    ConversationStore,
    ErasureSelector,
    LongTermStore,
    StoredFact,
    StoredTurn,
)

PAGE = 500


@dataclass
class Exported:
    """What an export wrote, for its audit line."""

    turns: int = 0
    digests: int = 0
    facts: int = 0


def selector(group: str, scope: ExportScope) -> ErasureSelector:
    return ErasureSelector(group=group, principal=scope.principal, agent=scope.agent)


def fact_scope(group: str, scope: ExportScope) -> Scope:
    return Scope(
        level=scope.level, group=group, session=None, principal=scope.principal, agent=scope.agent
    )


def turn_record(turn: StoredTurn) -> TurnRecord:
    return TurnRecord(
        session=turn.session,
        role=turn.role,
        text=turn.content,
        at=turn.at,
        principal=turn.principal,
        agent=turn.agent,
        tokens=turn.tokens,
        infer=turn.infer,
        folded=turn.folded,
        source="tool" if turn.source == "tool" else "saved" if turn.source == "saved" else None,
    )


def fact_record(fact: StoredFact) -> FactRecord:
    return FactRecord(
        id=fact.id,
        text=fact.text,
        session=fact.session,
        principal=fact.principal,
        agent=fact.agent,
        created_at=fact.created_at,
        updated_at=fact.updated_at,
        metadata=fact.metadata,
    )


async def export_lines(
    *,
    conversation: ConversationStore,
    longterm: LongTermStore,
    group: str,
    scope: ExportScope,
    embedding: Embedding,
    exported_at: str,
    counts: Exported,
    page: int = PAGE,
) -> AsyncIterator[bytes]:
    """The header, then every session's turns and digest versions, then the facts."""
    yield dump_line(Header(store=group, scope=scope, embedding=embedding, exported_at=exported_at))
    select = selector(group, scope)
    after_key: str | None = None
    while True:
        sessions = await conversation.export_sessions(select, after_key, page)
        for session in sessions:
            after_seq: int | None = None
            while True:
                turns, after_seq = await conversation.export_turns(session, select, after_seq, page)
                for turn in turns:
                    counts.turns += 1
                    yield dump_line(turn_record(turn))
                if after_seq is None:
                    break
            for digest in await conversation.export_digests(session):
                counts.digests += 1
                yield dump_line(
                    DigestRecord(
                        session=digest.session,
                        version=digest.version,
                        text=digest.summary,
                        at=digest.created_at,
                        principal=session.principal,
                    )
                )
        if len(sessions) < page:
            break
        after_key = sessions[-1].key
    cursor: str | None = None
    facts_scope = fact_scope(group, scope)
    while True:
        facts, cursor = await longterm.export_facts(facts_scope, page, cursor)
        for fact in facts:
            counts.facts += 1
            yield dump_line(fact_record(fact))
        if cursor is None:
            break
