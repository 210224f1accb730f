"""Erasure of the conversational tiers: every session an ``ErasureSelector`` reaches.

The sessions are found through the attribution index; each one loses its turns, digests,
fold rows (so late fold work finds them gone), attribution rows and leases in the same
transaction.
"""

from __future__ import annotations

from kaos_memory.storage.base import Erased, ErasureSelector
from kaos_memory.storage.sql.dialect import Tx


def _keys(tx: Tx, selector: ErasureSelector) -> list[str]:
    if selector.key is not None:
        return [selector.key]
    where, params = ["grp = %s"], [selector.group]
    if selector.principal is not None:
        where.append("principal = %s")
        params.append(selector.principal)
    if selector.agent is not None:
        where.append("agent = %s")
        params.append(selector.agent)
    rows = tx.all(
        f"SELECT DISTINCT key FROM kaos_mem_attribution WHERE {' AND '.join(where)}",
        tuple(params),
    )
    return [r[0] for r in rows]


def erase(tx: Tx, selector: ErasureSelector) -> Erased:
    turns = digests = 0
    for key in _keys(tx, selector):
        # Session row, then key lock: the order every writer takes them in.
        tx.execute("DELETE FROM kaos_mem_sessions WHERE key = %s", (key,))
        tx.lock_key(key)
        turns += max(tx.execute("DELETE FROM kaos_mem_turns WHERE key = %s", (key,)).rowcount, 0)
        digests += max(
            tx.execute("DELETE FROM kaos_mem_digests WHERE key = %s", (key,)).rowcount, 0
        )
        tx.execute("DELETE FROM kaos_mem_folds WHERE key = %s", (key,))
        tx.execute("DELETE FROM kaos_mem_attribution WHERE key = %s", (key,))
        tx.execute("DELETE FROM kaos_mem_leases WHERE key = %s", (key,))
    return Erased(turns=turns, digests=digests)
