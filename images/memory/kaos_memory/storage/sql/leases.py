"""Session leases: who works on a session's digests (or, separately, its extractions).

A lease is a row with an expiry (seconds since the epoch, from the store's clock) that the
holder renews; a crashed holder's lease lapses and another replica takes over.
"""

from __future__ import annotations

from kaos_memory.storage.base import LeaseKind
from kaos_memory.storage.sql.dialect import Tx


def holds(tx: Tx, key: str, kind: LeaseKind, owner: str) -> bool:
    row = tx.one(
        "SELECT 1 FROM kaos_mem_leases WHERE key = %s AND kind = %s AND owner = %s",
        (key, kind, owner),
    )
    return row is not None


def acquire(tx: Tx, key: str, kind: LeaseKind, owner: str, ttl: float) -> bool:
    cur = tx.execute(
        "INSERT INTO kaos_mem_leases (key, kind, owner, expires)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT (key, kind) DO UPDATE SET"
        " owner = excluded.owner, expires = excluded.expires"
        " WHERE kaos_mem_leases.expires < %s OR kaos_mem_leases.owner = excluded.owner",
        (key, kind, owner, tx.now + ttl, tx.now),
    )
    return cur.rowcount > 0


def renew(tx: Tx, key: str, kind: LeaseKind, owner: str, ttl: float) -> bool:
    cur = tx.execute(
        "UPDATE kaos_mem_leases SET expires = %s WHERE key = %s AND kind = %s AND owner = %s",
        (tx.now + ttl, key, kind, owner),
    )
    return cur.rowcount > 0


def release(tx: Tx, key: str, kind: LeaseKind, owner: str) -> None:
    tx.execute(
        "DELETE FROM kaos_mem_leases WHERE key = %s AND kind = %s AND owner = %s",
        (key, kind, owner),
    )


def release_all(tx: Tx) -> int:
    """Drop every lease: only for a single-writer store whose previous process is gone."""
    return max(tx.execute("DELETE FROM kaos_mem_leases").rowcount, 0)
