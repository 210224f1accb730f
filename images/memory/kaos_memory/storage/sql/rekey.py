"""Principals' sessions written under the shared key form, moved to keys of their own.

Before schema version 8 a session was keyed ``kaos_group:<group>|run:<session>`` whoever
wrote it and the first principal to write bound it, so another principal choosing the id
first could squat it. A principal's session is now keyed under that principal
(``scope.conversation_key``). Migration 8 lists in ``kaos_mem_rekeys`` the shared-form keys a
principal wrote to; the store moves each at start, before it answers anything (``move``),
in one transaction per session that also deletes its row: a crash leaves the sessions not
yet moved listed, and a session another replica moved meanwhile is skipped.

A sealed text names its row, key included (``sealing.turn_record``/``digest_record``), so
its text is opened under the old record and sealed again under the new one with its
owner's key (``reseal``); a text whose key is gone stays as it is and reads as erased
anywhere. A key with several principals (written before sessions were bound) is no one
principal's conversation: it stays where it is, reachable by erasure only.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from kaos_memory.crypto.keyring import DataKey, Keyring, owner_of
from kaos_memory.scope import conversation_key
from kaos_memory.storage.sql.dialect import Tx
from kaos_memory.storage.sql.sealing import digest_record, turn_record
from kaos_memory.storage.sql.window import NONE, session_owner

log = logging.getLogger(__name__)

# Every table with a session's key column; the sessions row is moved first (its lock).
SealedTurns = dict[int, tuple[str, str | None, str | None, str]]
_KEYED = (
    "kaos_mem_turns",
    "kaos_mem_digests",
    "kaos_mem_folds",
    "kaos_mem_attribution",
    "kaos_mem_leases",
    "kaos_mem_erased_keys",
)


class Changed(Exception):
    """The session was written to between reading and moving it: read it again."""


@dataclass
class Move:
    """One session to move: its keys and, with encryption, its sealed texts (as read)."""

    old: str
    new: str
    # Sealed turns: seq -> (content, principal, agent, rid); digests: version -> summary.
    turns: SealedTurns = field(default_factory=dict)
    digests: dict[int, str] = field(default_factory=dict)
    owner: tuple[str | None, str | None] = (None, None)
    # The texts sealed again under the new key, by seq and by version.
    sealed_turns: dict[int, str] = field(default_factory=dict)
    sealed_digests: dict[int, str] = field(default_factory=dict)


def pending(tx: Tx, after: str, limit: int) -> list[str]:
    rows = tx.all(
        "SELECT old_key FROM kaos_mem_rekeys WHERE old_key > %s ORDER BY old_key LIMIT %s",
        (after, limit),
    )
    return [r[0] for r in rows]


def _texts(tx: Tx, key: str) -> tuple[SealedTurns, dict[int, str]]:
    turns = {
        int(seq): (content, principal, agent, rid)
        for seq, content, principal, agent, rid in tx.all(
            "SELECT seq, content, principal, agent, rid FROM kaos_mem_turns"
            " WHERE key = %s AND rid IS NOT NULL",
            (key,),
        )
    }
    digests = {
        int(v): s
        for v, s in tx.all("SELECT version, summary FROM kaos_mem_digests WHERE key = %s", (key,))
    }
    return turns, digests


def plan(tx: Tx, old: str, sealed: bool) -> Move | None:
    """The move of ``old``; None when it is no one principal's session (no longer listed
    then), or holds sealed turns while this store has no keyring to seal them again (left
    listed for a start with one)."""
    if not sealed and tx.one(
        "SELECT 1 FROM kaos_mem_turns WHERE key = %s AND rid IS NOT NULL LIMIT 1", (old,)
    ):
        log.warning("a sealed session waits for a keyring to move", extra={"key": old})
        return None
    rows = tx.all(
        "SELECT DISTINCT grp, session, principal FROM kaos_mem_attribution"
        " WHERE key = %s AND principal <> %s",
        (old, NONE),
    )
    if len(rows) != 1:
        if rows:
            log.warning("a session of several principals keeps its shared key", extra={"key": old})
        tx.execute("DELETE FROM kaos_mem_rekeys WHERE old_key = %s", (old,))
        return None
    group, session, principal = rows[0]
    move = Move(old=old, new=conversation_key(group, session, principal))
    if sealed:
        move.turns, move.digests = _texts(tx, old)
        move.owner = session_owner(tx, old)
    return move


async def reseal(ring: Keyring, move: Move) -> None:
    """Seal the move's texts again to the new key's records, each with its owner's key."""
    batch = await ring.prepare([t[0] for t in move.turns.values()] + list(move.digests.values()))
    keys: dict[str, DataKey] = {}

    async def key(owner: str) -> DataKey:
        if owner not in keys:
            keys[owner] = await ring.key_for(owner)
        return keys[owner]

    for seq, (content, principal, agent, rid) in move.turns.items():
        text = ring.open(content, turn_record(move.old, rid), batch, keep=False)
        if text is not None and text != content:
            owner = owner_of(principal, agent)
            move.sealed_turns[seq] = (await key(owner)).seal(text, turn_record(move.new, rid))
    for version, summary in move.digests.items():
        text = ring.open(summary, digest_record(move.old, version), batch, keep=False)
        if text is not None and text != summary:
            data_key = await key(owner_of(*move.owner))
            move.sealed_digests[version] = data_key.seal(text, digest_record(move.new, version))


def apply(tx: Tx, move: Move, sealed: bool) -> bool:
    """Move the session in this transaction; False when another replica moved it already.
    ``Changed`` when its sealed texts are no longer the ones ``reseal`` sealed again."""
    if tx.execute("DELETE FROM kaos_mem_rekeys WHERE old_key = %s", (move.old,)).rowcount < 1:
        return False
    taken = "SELECT 1 FROM {} WHERE key = %s LIMIT 1"
    if tx.one(taken.format("kaos_mem_sessions"), (move.new,)) or tx.one(
        taken.format("kaos_mem_attribution"), (move.new,)
    ):
        # Cannot happen while every replica moves before it answers; never merge blindly.
        log.error("a session's own key is taken; it keeps its shared key", extra={"key": move.old})
        return False
    # Session row, then key lock: the order every writer takes them in.
    tx.execute("UPDATE kaos_mem_sessions SET key = %s WHERE key = %s", (move.new, move.old))
    tx.lock_key(move.old)
    if sealed and _texts(tx, move.old) != (move.turns, move.digests):
        raise Changed(move.old)
    for table in _KEYED:
        tx.execute(f"UPDATE {table} SET key = %s WHERE key = %s", (move.new, move.old))
    for seq, content in move.sealed_turns.items():
        tx.execute("UPDATE kaos_mem_turns SET content = %s WHERE seq = %s", (content, seq))
    for version, summary in move.sealed_digests.items():
        tx.execute(
            "UPDATE kaos_mem_digests SET summary = %s WHERE key = %s AND version = %s",
            (summary, move.new, version),
        )
    return True
