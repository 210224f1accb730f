"""The key table (``kaos_mem_keys``): one wrapped data key per owner of a group.

The rows hold only what the KEK wrapped (``crypto.kek``); ``crypto.keyring`` reads and
writes them through these functions. A principal's forget deletes the row in its
tombstone's transaction (``erasure.erase``).
"""

from __future__ import annotations

import base64

from kaos_memory.crypto.keyring import StoredKey
from kaos_memory.storage.sql.dialect import Tx

_COLUMNS = "id, grp, owner, kek_id, wrapped"


def _row(row: tuple[str, str, str, str, str] | None) -> StoredKey | None:
    if row is None:
        return None
    key_id, group, owner, kek_id, wrapped = row
    return StoredKey(
        id=key_id, group=group, owner=owner, kek_id=kek_id, blob=base64.b64decode(wrapped)
    )


def find(tx: Tx, group: str, owner: str) -> StoredKey | None:
    return _row(
        tx.one(
            f"SELECT {_COLUMNS} FROM kaos_mem_keys WHERE grp = %s AND owner = %s", (group, owner)
        )
    )


def load(tx: Tx, key_id: str) -> StoredKey | None:
    return _row(tx.one(f"SELECT {_COLUMNS} FROM kaos_mem_keys WHERE id = %s", (key_id,)))


def insert(tx: Tx, key: StoredKey) -> StoredKey:
    tx.execute(
        "INSERT INTO kaos_mem_keys (id, grp, owner, kek_id, wrapped, created_at)"
        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
        (key.id, key.group, key.owner, key.kek_id, base64.b64encode(key.blob).decode(), tx.now_iso),
    )
    found = find(tx, key.group, key.owner)
    assert found is not None
    return found


def delete(tx: Tx, group: str, owner: str) -> int:
    cur = tx.execute("DELETE FROM kaos_mem_keys WHERE grp = %s AND owner = %s", (group, owner))
    return max(cur.rowcount, 0)
