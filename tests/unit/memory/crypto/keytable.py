"""A key table in a dict (``KeyTable``), for the keyring's tests."""

from __future__ import annotations

import asyncio

from kaos_memory.crypto.keyring import StoredKey


class MemoryKeyTable:
    """``KeyTable`` in a dict, counting the rows written."""

    def __init__(self) -> None:
        self.rows: dict[str, StoredKey] = {}
        self.inserts = 0

    async def find_key(self, group: str, owner: str) -> StoredKey | None:
        return next((k for k in self.rows.values() if (k.group, k.owner) == (group, owner)), None)

    async def load_key(self, key_id: str) -> StoredKey | None:
        return self.rows.get(key_id)

    async def insert_key(self, key: StoredKey) -> StoredKey:
        await asyncio.sleep(0)  # another creator may run here
        found = await self.find_key(key.group, key.owner)
        if found is not None:
            return found
        self.inserts += 1
        self.rows[key.id] = key
        return key

    async def delete_key(self, group: str, owner: str) -> int:
        doomed = [i for i, k in self.rows.items() if (k.group, k.owner) == (group, owner)]
        for key_id in doomed:
            del self.rows[key_id]
        return len(doomed)
