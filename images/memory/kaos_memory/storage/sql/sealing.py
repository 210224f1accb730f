"""The conversational tiers' texts sealed on write and opened on read (``crypto``).

A turn is sealed under its owner's key (``owner_of`` its principal and agent) to the record
``turn:<conversation key>/<rid>`` (``rid`` a random id stored in the row); a digest version
under the owner of its session to ``digest:<conversation key>/<version>``. A text that does
not open (its key was shredded) reads as erased: the turn is left out, the digest is none.

Opened turns are kept in the keyring's text cache under their session (``turn_space``) and
record id, so a window read on every turn of a conversation finds each turn by its id,
without building its record (``Keyring.opened``); the stored ciphertext must be the one the
cached text was opened from.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from typing import Any

from kaos_memory.crypto.keyring import Batch, DataKey, Keyring
from kaos_memory.crypto.opened import Entry
from kaos_memory.storage.base import Digest, Fold, NewTurn, SessionRead, TurnRow

_RID_BYTES = 8


def turn_record(key: str, rid: str | None) -> str:
    return f"turn:{key}/{rid}"


def turn_space(key: str) -> str:
    """The text cache's space of a session's turns: ``turn_record(key, rid)`` is this
    followed by ``rid``."""
    return f"turn:{key}/"


def digest_record(key: str, version: int) -> str:
    return f"digest:{key}/{version}"


def seal_turns(ring: Keyring, data_key: DataKey, key: str, turns: list[NewTurn]) -> list[NewTurn]:
    """The turns sealed, each to a new record id; kept opened for the window's next read."""
    out = []
    space = turn_space(key)
    for turn in turns:
        rid = os.urandom(_RID_BYTES).hex()
        sealed = data_key.seal(turn.content, turn_record(key, rid))
        ring.remember(space, rid, sealed, turn.content)
        out.append(NewTurn(role=turn.role, content=sealed, tokens=turn.tokens, rid=rid))
    return out


def _open_turn(
    ring: Keyring,
    batch: Batch,
    key: str,
    opened: Mapping[str, Entry],
    content: str,
    rid: str | None,
) -> str | None:
    """A turn's text: the cached one when the row holds the ciphertext it was opened from,
    else opened (and cached); None when its key is gone (erased)."""
    hit = None if rid is None else opened.get(rid)
    if hit is not None and hit[0] == content:
        return hit[1]
    text = ring.open(content, turn_record(key, rid), batch, keep=False)
    if text is not None and rid is not None and text is not content:
        ring.remember(turn_space(key), rid, content, text)
    return text


def _open_turns(ring: Keyring, batch: Batch, key: str, turns: Iterable[TurnRow]) -> list[TurnRow]:
    opened = ring.opened(turn_space(key))
    out = []
    for t in turns:
        content = _open_turn(ring, batch, key, opened, t.content, t.rid)
        if content is not None:  # None: its key is gone, erased
            out.append(dataclasses.replace(t, content=content))
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
    # Found once, after ``prepare`` (which drops the texts of keys it finds gone).
    opened = ring.opened(turn_space(key))
    out = []
    for seq, role, content, tokens, at, who, agent, infer, rid, source in window:
        hit = opened.get(rid)
        if hit is not None and hit[0] == content:
            text: str | None = hit[1]
        else:
            text = _open_turn(ring, batch, key, opened, content, rid)
        if text is not None:  # None: its key is gone, erased
            out.append(
                TurnRow(int(seq), role, text, int(tokens), at, who, agent, bool(infer), rid, source)
            )
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
