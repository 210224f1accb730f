"""The keyring over an in-memory key table: one key per owner, opened after a restart,
gone after a shred."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from kaos_memory.crypto.kek import KeyUnreadable, SecretFileKek, new_kek_version
from kaos_memory.crypto.keyring import Keyring, owner_of

from tests.unit.memory.crypto.keytable import MemoryKeyTable


@pytest.fixture
def kek(tmp_path: Path) -> SecretFileKek:
    (tmp_path / "v1").write_text(new_kek_version())
    (tmp_path / "current").write_text("v1")
    return SecretFileKek(tmp_path)


def test_owners_are_the_principal_else_the_agent_else_the_store() -> None:
    assert owner_of("alice", "agent-a") == "principal:alice"
    assert owner_of(None, "agent-a") == "agent:agent-a"
    assert owner_of(None, None) == "store"


async def test_one_key_per_owner_even_when_asked_at_once(kek: SecretFileKek) -> None:
    table = MemoryKeyTable()
    ring = Keyring("g", table, kek)
    keys = await asyncio.gather(*(ring.key_for("principal:alice") for _ in range(5)))
    assert len({k.id for k in keys}) == 1
    assert table.inserts == 1
    assert (await ring.key_for("principal:bob")).id != keys[0].id


async def test_a_fresh_keyring_opens_what_another_sealed(kek: SecretFileKek) -> None:
    table = MemoryKeyTable()
    sealed = (await Keyring("g", table, kek).key_for("principal:alice")).seal("hi", "turn:k/1")

    restarted = Keyring("g", table, kek)
    assert restarted.open(sealed, "turn:k/1") is None  # not loaded yet
    batch = await restarted.prepare([sealed, "plain"])
    assert restarted.open(sealed, "turn:k/1", batch) == "hi"
    assert restarted.open(sealed, "turn:k/2", batch) is None  # another row
    assert restarted.open("plain", "turn:k/1", batch) == "plain"


async def test_a_shredded_key_opens_nothing_and_the_owner_gets_a_new_one(
    kek: SecretFileKek,
) -> None:
    table = MemoryKeyTable()
    ring = Keyring("g", table, kek)
    old = await ring.key_for("principal:alice")
    sealed = old.seal("hi", "turn:k/1")
    await table.delete_key("g", "principal:alice")  # the tombstone's transaction
    await ring.shred("principal:alice")
    assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed])) is None

    restarted = Keyring("g", table, kek)
    assert restarted.open(sealed, "turn:k/1", await restarted.prepare([sealed])) is None
    assert (await ring.key_for("principal:alice")).id != old.id


async def test_another_replica_shredding_a_key_is_noticed_on_revalidation(
    kek: SecretFileKek,
) -> None:
    table = MemoryKeyTable()
    ring = Keyring("g", table, kek, revalidate=0.0)
    old = await ring.key_for("principal:alice")
    await table.delete_key("g", "principal:alice")
    assert (await ring.key_for("principal:alice")).id != old.id


async def test_the_cache_is_bounded(kek: SecretFileKek) -> None:
    table = MemoryKeyTable()
    ring = Keyring("g", table, kek, capacity=2)
    sealed = [(await ring.key_for(f"agent:{i}")).seal(str(i), "r") for i in range(3)]
    assert ring.open(sealed[0], "r") is None  # evicted
    # A batch larger than the cache still opens whole: ``prepare`` hands its keys over.
    batch = await ring.prepare(sealed)
    assert [ring.open(s, "r", batch) for s in sealed] == ["0", "1", "2"]


async def test_a_kek_that_cannot_unwrap_replaces_nothing(
    kek: SecretFileKek, tmp_path: Path
) -> None:
    table = MemoryKeyTable()
    sealed = (await Keyring("g", table, kek).key_for("principal:alice")).seal("hi", "r")

    # Another Secret (a replica given the wrong one, a version not mounted yet).
    other = tmp_path / "other"
    other.mkdir()
    (other / "v1").write_text(new_kek_version())
    (other / "current").write_text("v1")
    wrong = Keyring("g", table, SecretFileKek(other))
    with pytest.raises(KeyUnreadable):
        await wrong.key_for("principal:alice")
    assert wrong.open(sealed, "r", await wrong.prepare([sealed])) is None
    # The key is still the owner's, and the right KEK still opens its texts.
    assert len(table.rows) == 1
    right = Keyring("g", table, kek)
    assert right.open(sealed, "r", await right.prepare([sealed])) == "hi"
