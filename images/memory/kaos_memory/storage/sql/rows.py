"""Row readers both the window and the outbox use: turns and the latest digest."""

from __future__ import annotations

from typing import Any

from kaos_memory.storage.base import Digest, TurnRow
from kaos_memory.storage.sql.dialect import Tx

TURN_COLUMNS = "seq, role, content, tokens, at, principal, agent, infer, rid, source"


def turn_row(row: tuple[Any, ...]) -> TurnRow:
    seq, role, content, tokens, at, principal, agent, infer, rid, source = row
    return TurnRow(
        seq=int(seq),
        role=role,
        content=content,
        tokens=int(tokens),
        at=at,
        principal=principal,
        agent=agent,
        infer=bool(infer),
        rid=rid,
        source=source,
    )


LATEST_DIGEST = (
    "SELECT version, summary FROM kaos_mem_digests WHERE key = %s ORDER BY version DESC LIMIT 1"
)


def digest_row(row: tuple[Any, ...] | None) -> Digest | None:
    return None if row is None else Digest(version=int(row[0]), summary=row[1])


def latest_digest(tx: Tx, key: str) -> Digest | None:
    return digest_row(tx.one(LATEST_DIGEST, (key,)))
