"""How long a cached data key is used before it is checked again (``revalidate``, the KEK's
``check_seconds``), on an injected clock: within the bound a key destroyed elsewhere still
opens from memory (no KEK call per read); past it every read checks, and a key found
destroyed opens nothing, its opened texts included; a check that cannot finish opens
nothing and raises; a write gets a new key."""

from __future__ import annotations

from pathlib import Path

import pytest
from kaos_memory.crypto.kek import (
    SECRET_CHECK_SECONDS,
    KeyDestroyed,
    SecretFileKek,
    WrappedKey,
    new_kek_version,
)
from kaos_memory.crypto.keyring import Keyring
from kaos_memory.errors import StorageUnavailable
from kaos_memory.storage.base import NewTurn
from kaos_memory.storage.sql import sealing

from tests.unit.memory.crypto.keytable import MemoryKeyTable

ALICE = "principal:alice"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class DestroyableKek:
    """A KEK (the Secret one inside) whose owners' keys can be destroyed behind the
    keyring's back, as in a KMS, or which stops answering; counts its unwraps."""

    check_seconds = 5.0

    def __init__(self, inner: SecretFileKek) -> None:
        self.inner = inner
        self.destroyed: set[str] = set()
        self.down = False
        self.unwraps = 0

    async def wrap(self, owner: str, data_key: bytes) -> WrappedKey:
        return await self.inner.wrap(owner, data_key)

    async def unwrap(self, owner: str, wrapped: WrappedKey) -> bytes:
        self.unwraps += 1
        if self.down:
            raise StorageUnavailable("the KMS does not answer")
        if owner in self.destroyed:
            raise KeyDestroyed("destroyed in the KMS")
        return await self.inner.unwrap(owner, wrapped)

    async def destroy(self, owner: str) -> None:
        self.destroyed.add(owner)

    async def close(self) -> None:
        return None


@pytest.fixture
def kek(tmp_path: Path) -> DestroyableKek:
    (tmp_path / "v1").write_text(new_kek_version())
    (tmp_path / "current").write_text("v1")
    return DestroyableKek(SecretFileKek(tmp_path))


def test_the_bound_is_the_keks_unless_given(kek: DestroyableKek, tmp_path: Path) -> None:
    assert Keyring("g", MemoryKeyTable(), kek).revalidate == 5.0
    assert Keyring("g", MemoryKeyTable(), kek, revalidate=0).revalidate == 0
    secret = Keyring("g", MemoryKeyTable(), kek.inner)
    assert secret.revalidate == SECRET_CHECK_SECONDS


async def test_a_key_destroyed_in_the_kek_opens_until_the_bound_and_never_after(
    kek: DestroyableKek,
) -> None:
    clock, table = Clock(), MemoryKeyTable()
    writer = Keyring("g", table, kek, clock=clock)
    sealed = (await writer.key_for(ALICE)).seal("hi", "turn:k/1")
    reader = Keyring("g", table, kek, clock=clock)  # another replica
    assert reader.open(sealed, "turn:k/1", await reader.prepare([sealed])) == "hi"
    unwraps = kek.unwraps

    await kek.destroy(writer.kek_owner(ALICE))  # by hand, outside a forget
    clock.now += 4.9
    # Within the bound: opened from memory, the KEK not asked.
    for ring in (writer, reader):
        assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed])) == "hi"
    assert kek.unwraps == unwraps

    clock.now += 0.1
    for ring in (writer, reader):
        assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed])) is None
        # Its opened texts went with it; a fresh read asks nothing more of the KEK.
        assert ring.texts.get("turn:k/1", sealed) is None
        assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed])) is None
    assert kek.unwraps == unwraps + 2

    # The owner's next write replaces the destroyed key's row with a new key.
    fresh = await writer.key_for(ALICE)
    assert fresh.head != sealed[: len(fresh.head)]
    assert [k.id for k in table.rows.values()] == [fresh.id.hex()]


async def test_a_bound_of_zero_checks_every_read(kek: DestroyableKek) -> None:
    clock, table = Clock(), MemoryKeyTable()
    ring = Keyring("g", table, kek, revalidate=0, clock=clock)
    sealed = (await ring.key_for(ALICE)).seal("hi", "turn:k/1")
    assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed, sealed])) == "hi"
    assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed])) == "hi"
    before = kek.unwraps

    await kek.destroy(ring.kek_owner(ALICE))

    assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed])) is None
    assert kek.unwraps == before + 1


async def test_a_key_row_deleted_by_another_replica_is_noticed_at_the_bound(
    kek: DestroyableKek,
) -> None:
    clock, table = Clock(), MemoryKeyTable()
    ring = Keyring("g", table, kek, clock=clock)
    sealed = (await ring.key_for(ALICE)).seal("hi", "turn:k/1")
    assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed])) == "hi"

    await table.delete_key("g", ALICE)  # another replica's forget
    clock.now += kek.check_seconds

    assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed])) is None


async def test_a_check_that_cannot_finish_opens_nothing(kek: DestroyableKek) -> None:
    clock, table = Clock(), MemoryKeyTable()
    ring = Keyring("g", table, kek, clock=clock)
    sealed = (await ring.key_for(ALICE)).seal("hi", "turn:k/1")
    assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed])) == "hi"

    kek.down = True
    clock.now += kek.check_seconds
    with pytest.raises(StorageUnavailable):
        await ring.prepare([sealed])
    with pytest.raises(StorageUnavailable):
        await ring.key_for(ALICE)

    # Not an erasure: once the KEK answers, the key opens again.
    kek.down = False
    assert ring.open(sealed, "turn:k/1", await ring.prepare([sealed])) == "hi"


async def test_a_window_read_opens_each_turn_for_its_own_row_only(kek: DestroyableKek) -> None:
    ring = Keyring("g", MemoryKeyTable(), kek)
    data_key = await ring.key_for(ALICE)
    first, second = sealing.seal_turns(
        ring, data_key, "k", [NewTurn("user", "one", 1), NewTurn("user", "two", 1)]
    )

    def rows(*turns: tuple[str, str | None]) -> list[list[tuple[object, ...]]]:
        window = [
            (i, "user", c, 1, "t", "alice", None, False, r, None) for i, (c, r) in enumerate(turns)
        ]
        return [window]

    async def read(key: str, *turns: tuple[str, str | None]) -> list[str]:
        found = await sealing.read_rows(ring, key, rows(*turns), None, turns=True, digest=False)
        return [t.content for t in found.turns]

    assert await read("k", (first.content, first.rid), (second.content, second.rid)) == [
        "one",
        "two",
    ]
    # A row whose ciphertext was replaced by another row's: not opened from the cache.
    assert await read("k", (second.content, first.rid)) == []
    # The same rows copied to another session: not theirs.
    assert await read("other", (first.content, first.rid)) == []
    # A row written in the clear reads as it is.
    assert await read("k", ("plain", None)) == ["plain"]
