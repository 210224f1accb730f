"""The conversational tiers' texts sealed on write and opened on read (``crypto``).

A turn is sealed under its owner's key (``owner_of`` its principal and agent) to the record
``turn:<conversation key>/<rid>`` (``rid`` a random id stored in the row); a digest version
under the owner of its session to ``digest:<conversation key>/<version>``. A text that does
not open (its key was shredded) reads as erased: the turn is left out, the digest is none.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from kaos_memory.crypto.keyring import Batch, DataKey, Keyring
from kaos_memory.storage.base import Digest, Fold, NewTurn, SessionRead, TurnRow

_RID_BYTES = 8


def turn_record(key: str, rid: str | None) -> str:
    return f"turn:{key}/{rid}"


def digest_record(key: str, version: int) -> str:
    return f"digest:{key}/{version}"


def seal_turns(ring: Keyring, data_key: DataKey, key: str, turns: list[NewTurn]) -> list[NewTurn]:
    """The turns sealed, each to a new record id; kept opened for the window's next read."""
    out = []
    for turn in turns:
        rid = os.urandom(_RID_BYTES).hex()
        record = turn_record(key, rid)
        sealed = data_key.seal(turn.content, record)
        ring.remember_text(sealed, record, turn.content)
        out.append(NewTurn(role=turn.role, content=sealed, tokens=turn.tokens, rid=rid))
    return out


def _open_turns(ring: Keyring, batch: Batch, key: str, turns: Iterable[TurnRow]) -> list[TurnRow]:
    out = []
    for t in turns:
        content = ring.open(t.content, turn_record(key, t.rid), batch)
        if content is None:
            continue  # its key is gone: erased
        out.append(
            TurnRow(
                seq=t.seq,
                role=t.role,
                content=content,
                tokens=t.tokens,
                at=t.at,
                principal=t.principal,
                agent=t.agent,
                infer=t.infer,
                rid=t.rid,
            )
        )
    return out


async def read_rows(
    ring: Keyring,
    key: str,
    results: list[list[tuple[Any, ...]]],
    principal: str | None,
    *,
    turns: bool,
    digest: bool,
) -> SessionRead:
    """``window.session_read`` of sealed rows: each turn is built once, from its opened
    text (a recall's hot path: no second copy of the window)."""
    rows = iter(results)
    if principal is not None and not next(rows):
        return SessionRead(turns=[], digest=None)
    window = next(rows) if turns else []
    latest = next(rows) if digest else []
    batch = await ring.prepare([r[2] for r in window] + [r[1] for r in latest])
    out = []
    for seq, role, content, tokens, at, who, agent, infer, rid in window:
        text = ring.open(content, f"turn:{key}/{rid}", batch)
        if text is not None:  # None: its key is gone, erased
            out.append(TurnRow(int(seq), role, text, int(tokens), at, who, agent, bool(infer), rid))
    found = None
    if latest:
        version = int(latest[0][0])
        summary = ring.open(latest[0][1], digest_record(key, version), batch)
        found = None if summary is None else Digest(version=version, summary=summary)
    return SessionRead(turns=out, digest=found)


async def open_digest(ring: Keyring, key: str, digest: Digest | None) -> Digest | None:
    if digest is None:
        return None
    batch = await ring.prepare([digest.summary])
    summary = ring.open(digest.summary, digest_record(key, digest.version), batch)
    return None if summary is None else Digest(version=digest.version, summary=summary)


async def open_folds(ring: Keyring, folds: list[Fold]) -> list[Fold]:
    batch = await ring.prepare(t.content for f in folds for t in f.turns)
    return [
        Fold(
            id=f.id,
            key=f.key,
            session=f.session,
            turns=_open_turns(ring, batch, f.key, f.turns),
            attempts=f.attempts,
            retry_at=f.retry_at,
            trace_context=f.trace_context,
        )
        for f in folds
    ]
