"""The receipt signing key of a store group without a key Secret (``kaos_mem_receipt_keys``).

The first replica to start stores the key it generated; every replica (and every later
start) signs with the stored one, so a receipt verifies with the one key the store serves.
"""

from __future__ import annotations

from kaos_memory.storage.sql.dialect import Tx


def signing_key(tx: Tx, group: str, candidate: str) -> str:
    """The group's stored key: ``candidate`` if none was stored yet, else the stored one."""
    tx.execute(
        "INSERT INTO kaos_mem_receipt_keys (grp, private_key, created_at) VALUES (%s, %s, %s)"
        " ON CONFLICT (grp) DO NOTHING",
        (group, candidate, tx.now),
    )
    row = tx.one("SELECT private_key FROM kaos_mem_receipt_keys WHERE grp = %s", (group,))
    assert row is not None  # inserted or already there, in this transaction
    return str(row[0])
