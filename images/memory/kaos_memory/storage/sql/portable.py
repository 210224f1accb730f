"""The conversational rows an export reads and an import writes (``kaos_memory.portable``).

Reads are keyset pages (sessions by key, turns by seq), so an export never holds a store in
memory. An import writes one session's batch in one transaction under the session's lock:
turns that were folded in the source go under one fold recorded as digested and extracted
(their digest versions and facts travel as records of their own, so no model runs on them
again), the others into the window; digest versions keep their numbers and one the
session already has is left as it is.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from kaos_memory.crypto.keyring import KeyGone, Keyring, owner_of
from kaos_memory.storage.base import (
    ErasureSelector,
    SessionBound,
    StoredDigest,
    StoredSession,
    StoredTurn,
)
from kaos_memory.storage.sql.dialect import Tx
from kaos_memory.storage.sql.sealing import digest_record, turn_record
from kaos_memory.storage.sql.window import NONE

# A session's principal is in its key (``conversation_key``), so every attribution row of
# the key names the same one; MAX skips the "no principal" marker a legacy row may add.
_SESSIONS = "SELECT key, session, MAX(principal) FROM kaos_mem_attribution WHERE grp = %s"
_TURN_COLUMNS = "seq, role, content, tokens, at, principal, agent, infer, folded_by, rid, source"
_INSERT_TURN = (
    "INSERT INTO kaos_mem_turns (key, role, content, tokens, at, principal, agent, infer,"
    " folded_by, rid, source)"
)
_INSERT_SEALED = (
    _INSERT_TURN + " SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s"
    " WHERE EXISTS (SELECT 1 FROM kaos_mem_keys WHERE id = %s)"
)


def sessions(
    tx: Tx, selector: ErasureSelector, after: str | None, limit: int
) -> list[StoredSession]:
    text = _SESSIONS
    params: list[Any] = [selector.group]
    if selector.key is not None:
        text += " AND key = %s"
        params.append(selector.key)
    if selector.principal is not None:
        text += " AND principal = %s"
        params.append(selector.principal)
    if selector.agent is not None:
        text += " AND agent = %s"
        params.append(selector.agent)
    if after is not None:
        text += " AND key > %s"
        params.append(after)
    rows = tx.all(text + " GROUP BY key, session ORDER BY key LIMIT %s", (*params, limit))
    return [StoredSession(key=k, session=s, principal=p or None) for k, s, p in rows]


def turns(
    tx: Tx, session: StoredSession, selector: ErasureSelector, after: int | None, limit: int
) -> list[StoredTurn]:
    text = f"SELECT {_TURN_COLUMNS} FROM kaos_mem_turns WHERE key = %s"
    params: list[Any] = [session.key]
    if selector.principal is not None:
        text += " AND principal = %s"
        params.append(selector.principal)
    if selector.agent is not None:
        text += " AND agent = %s"
        params.append(selector.agent)
    if after is not None:
        text += " AND seq > %s"
        params.append(after)
    rows = tx.all(text + " ORDER BY seq LIMIT %s", (*params, limit))
    return [_turn(session.session, r) for r in rows]


def _turn(session: str, row: tuple[Any, ...]) -> StoredTurn:
    seq, role, content, tokens, at, principal, agent, infer, folded_by, rid, source = row
    return StoredTurn(
        session=session,
        role=role,
        content=content,
        tokens=int(tokens),
        at=at,
        principal=principal,
        agent=agent,
        infer=bool(infer),
        folded=folded_by is not None,
        seq=int(seq),
        rid=rid,
        source=source,
    )


def digests(tx: Tx, session: StoredSession) -> list[StoredDigest]:
    rows = tx.all(
        "SELECT version, summary, created_at FROM kaos_mem_digests WHERE key = %s ORDER BY version",
        (session.key,),
    )
    return [StoredDigest(session.session, int(v), s, c) for v, s, c in rows]


def principals(tx: Tx, key: str) -> set[str]:
    return {
        r[0]
        for r in tx.all(
            "SELECT DISTINCT principal FROM kaos_mem_attribution"
            " WHERE key = %s AND principal <> %s",
            (key, NONE),
        )
    }


def import_session(
    tx: Tx,
    key: str,
    group: str,
    session: str,
    new_turns: list[StoredTurn],
    new_digests: list[StoredDigest],
) -> tuple[int, int]:
    tx.lock_key(key)
    writers = {t.principal for t in new_turns}
    owners: set[str | None] = set(principals(tx, key))
    # A session is one principal's conversation, in an import as in a write.
    if (owners and not writers <= owners) or len(writers | owners) > 1:
        raise SessionBound(key)
    last = max((t.at for t in new_turns), default=tx.now_iso)
    # Flushed: imported turns wait for the session's next write like settled ones, they
    # do not start an idle flush of their own.
    tx.execute(
        "INSERT INTO kaos_mem_sessions (key, grp, session, last_at, flushed)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
        (key, group, session, last, True),
    )
    folded = [t for t in new_turns if t.folded]
    fold_id = _settled_fold(tx, key, session, folded) if folded else None
    for turn in new_turns:
        values = (
            key,
            turn.role,
            turn.content,
            turn.tokens,
            turn.at,
            turn.principal,
            turn.agent,
            turn.infer,
            fold_id if turn.folded else None,
            turn.rid,
            turn.source,
        )
        if turn.key_id is None:
            tx.execute(
                _INSERT_TURN + " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", values
            )
        # Sealed: only while its key row exists (a forget may have shredded the key the
        # importer sealed with); the whole batch rolls back otherwise.
        elif tx.execute(_INSERT_SEALED, (*values, turn.key_id)).rowcount < 1:
            raise KeyGone(turn.key_id)
    if fold_id is not None:
        first, last_seq = tx.one(
            "SELECT MIN(seq), MAX(seq) FROM kaos_mem_turns WHERE folded_by = %s", (fold_id,)
        )
        tx.execute(
            "UPDATE kaos_mem_folds SET first_seq = %s, last_seq = %s WHERE id = %s",
            (first, last_seq, fold_id),
        )
    for principal, agent in {(t.principal, t.agent) for t in new_turns}:
        tx.execute(
            "INSERT INTO kaos_mem_attribution (key, grp, session, principal, agent)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (key, group, session, principal or NONE, agent or NONE),
        )
    written = 0
    for digest in new_digests:
        cur = tx.execute(
            "INSERT INTO kaos_mem_digests (key, version, summary, created_at)"
            " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (key, digest.version, digest.summary, digest.created_at),
        )
        written += max(cur.rowcount, 0)
    return len(new_turns), written


def _settled_fold(tx: Tx, key: str, session: str, folded: list[StoredTurn]) -> int:
    """A fold whose digest and extraction are done: the outbox never picks it up."""
    row = tx.one(
        "INSERT INTO kaos_mem_folds (key, session, first_seq, last_seq, turns, tokens,"
        " digest_status, extraction_status, extraction_attempts, failures, created_at,"
        " extracted_at) VALUES (%s, %s, 0, 0, %s, %s, 'done', 'done', 0, 0, %s, %s)"
        " RETURNING id",
        (key, session, len(folded), sum(t.tokens for t in folded), tx.now_iso, tx.now_iso),
    )
    return int(row[0])


# --- sealing (a store whose texts are sealed under per-owner keys: ``crypto``) ---------------


async def opened_turns(ring: Keyring, key: str, turns: list[StoredTurn]) -> list[StoredTurn]:
    """The turns in the clear; one whose key was shredded reads as erased (left out)."""
    await ring.prepare(t.content for t in turns)
    out = []
    for t in turns:
        text = ring.open(t.content, turn_record(key, t.rid))
        if text is not None:
            out.append(dataclasses.replace(t, content=text))
    return out


async def opened_digests(
    ring: Keyring, key: str, digests: list[StoredDigest]
) -> list[StoredDigest]:
    await ring.prepare(d.summary for d in digests)
    out = []
    for d in digests:
        text = ring.open(d.summary, digest_record(key, d.version))
        if text is not None:
            out.append(dataclasses.replace(d, summary=text))
    return out


async def sealed(
    ring: Keyring,
    key: str,
    turns: list[StoredTurn],
    digests: list[StoredDigest],
    owner: tuple[str | None, str | None],
) -> tuple[list[StoredTurn], list[StoredDigest]]:
    """An import's texts sealed as a write seals them: each turn under its owner's key,
    bound to a fresh record id; the digest versions under the session owner's."""
    out = []
    for t in turns:
        data_key = await ring.key_for(owner_of(t.principal, t.agent))
        rid = os.urandom(8).hex()
        text = data_key.seal(t.content, turn_record(key, rid))
        out.append(dataclasses.replace(t, content=text, rid=rid, key_id=data_key.id.hex()))
    session_key = await ring.key_for(owner_of(*owner))
    versions = [
        dataclasses.replace(d, summary=session_key.seal(d.summary, digest_record(key, d.version)))
        for d in digests
    ]
    return out, versions
