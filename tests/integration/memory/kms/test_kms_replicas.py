"""A principal's key destroyed in the KMS by hand (not by a forget) on replicas that hold
the unwrapped data key in memory: every replica stops opening the principal's records within
``KAOS_MEMORY_ENCRYPTION_KMS_KEY_CHECK_SECONDS`` of the destruction (at once with 0), reads
them as erased (never an error), and everyone else's still open.

One test drives two keyrings (two replicas' caches) over one store's key table on an injected
clock, so the bound is crossed without sleeping; the other runs two memory service replicas
on one PostgreSQL database with the bound at 0.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kaos_memory.crypto.keyring import Keyring
from kaos_memory.crypto.kms import KMS_PREFIX
from kaos_memory.storage.sql.sqlite import SqliteDialect
from kaos_memory.storage.sql.store import SqlConversationStore

from tests.fixtures.memory import MakeMemory
from tests.integration.memory.encryption.support import SETTINGS, owner, readable, write_memory
from tests.support.kms import LocalKms
from tests.support.memory_http import call

GROUP = "kaos_memory"
STORE = "kaos-tests/replicas/kaos_memory"
BOUND = 5.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def destroy_by_hand(kms: LocalKms, kek_id: str) -> None:
    """What someone allowed ``kms:ScheduleKeyDeletion`` does in the KMS's console."""
    status, answer = kms.call(
        "ScheduleKeyDeletion",
        {"KeyId": kek_id.removeprefix(KMS_PREFIX), "PendingWindowInDays": 7},
    )
    assert status == 200, answer


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlConversationStore]:
    """The key table both replicas' keyrings share (a local store's)."""
    conversation = SqlConversationStore(SqliteDialect(tmp_path / "conversation.sqlite3"))
    await conversation.start()
    try:
        yield conversation
    finally:
        await conversation.close()


async def test_a_key_destroyed_in_the_kms_opens_on_no_replica_past_the_bound(
    kms: LocalKms, store: SqlConversationStore
) -> None:
    clock = Clock()
    rings = [
        Keyring(GROUP, store, kms.backend(STORE, check_seconds=BOUND), clock=clock)
        for _ in range(2)
    ]
    run = uuid.uuid4().hex[:8]
    alice, bob = f"principal:alice-{run}", f"principal:bob-{run}"
    alices = (await rings[0].key_for(alice)).seal("alice's text", "turn:k/1")
    bobs = (await rings[1].key_for(bob)).seal("bob's text", "turn:k/2")
    for ring in rings:
        batch = await ring.prepare([alices, bobs])
        assert ring.open(alices, "turn:k/1", batch) == "alice's text"
        assert ring.open(bobs, "turn:k/2", batch) == "bob's text"
    stored = await store.find_key(GROUP, alice)
    assert stored is not None

    destroy_by_hand(kms, stored.kek_id)

    # Within the bound each replica opens from memory: no KMS call on every read.
    clock.now += BOUND - 0.5
    for ring in rings:
        assert ring.open(alices, "turn:k/1", await ring.prepare([alices])) == "alice's text"
    # Past it, every replica has asked the KMS again: alice reads as erased, bob does not.
    clock.now += 0.5
    for ring in rings:
        batch = await ring.prepare([alices, bobs])
        assert ring.open(alices, "turn:k/1", batch) is None
        assert ring.open(bobs, "turn:k/2", batch) == "bob's text"
    # Alice's next write is sealed under a new key (and a new KMS key) every replica opens.
    fresh = await rings[1].key_for(alice)
    again = await store.find_key(GROUP, alice)
    assert again is not None and again.id == fresh.id.hex()
    assert again.kek_id != stored.kek_id
    later = fresh.seal("alice again", "turn:k/3")
    assert rings[0].open(later, "turn:k/3", await rings[0].prepare([later])) == "alice again"
    for ring in rings:
        await ring.close()


@pytest.mark.postgres
async def test_a_key_destroyed_in_the_kms_reads_as_erased_on_every_replica_at_once(
    memory_factory: MakeMemory, kms: LocalKms, pg_dsn: str
) -> None:
    settings = {**kms.memory_settings(), **SETTINGS, "encryption_kms_key_check_seconds": 0}
    first, second = (memory_factory("external", dsn=pg_dsn, **settings) for _ in range(2))
    alice, bob = owner("alice"), owner("bob")
    await write_memory(first, alice)
    await write_memory(second, bob)
    # Both replicas have opened alice's and bob's records: each holds their keys in memory.
    for replica in (first, second):
        assert await readable(replica, alice) == alice.markers
        assert await readable(replica, bob) == bob.markers
    rows = first.db.relational(
        "SELECT kek_id FROM kaos_mem_keys WHERE owner = %s", (f"principal:{alice.principal}",)
    )
    assert len(rows) == 1

    destroy_by_hand(kms, rows[0][0])

    # The next read on each replica: 200, not degraded, nothing of alice's; bob's all there.
    for replica in (first, second):
        assert await readable(replica, alice) == []
        assert await readable(replica, bob) == bob.markers
    # Alice writes again: a new key, readable on the other replica.
    status, doc, _ = await call(
        second.url,
        "/v1/write",
        {"turns": [{"role": "user", "content": f"later {alice.window}"}]},
        hdrs=alice.ident,
    )
    assert status in (200, 202), doc
    status, doc, _ = await call(
        first.url, "/v1/recall", {"level": "session", "query": "later"}, hdrs=alice.ident
    )
    assert status == 200 and doc["degraded"] is False, doc
    window = json.dumps(doc["short_term"])
    assert f"later {alice.window}" in window
    assert f"and then {alice.window}" not in window
