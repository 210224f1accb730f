"""The KMS key-encryption key (``kaos_memory.crypto.kms``) against a real KMS (Local KMS,
``hack/kms-build``): a key per owner found again by its alias, data keys that unwrap only
for their owner, rotation that keeps every wrapped key readable, and a destroy that makes
the owner's wrapped keys unreadable at once for every replica, while a key disabled by hand
is an error and never an erasure."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable

import pytest
from kaos_memory.crypto.kek import KeyDestroyed, WrappedKey
from kaos_memory.crypto.kms import KMS_PREFIX, KmsError, KmsKeyEncryptionKey

from tests.support.kms import ACCOUNT, REGION, LocalKms

Replicas = Callable[[], KmsKeyEncryptionKey]
Owner = Callable[[str], str]


def key_version(wrapped: WrappedKey) -> int:
    """The key material version Local KMS wrote into its ciphertext: one length byte, the
    key's ARN, then the version (4 bytes, little-endian)."""
    n = wrapped.blob[0]
    return int.from_bytes(wrapped.blob[1 + n : 5 + n], "little")


def key_id(wrapped: WrappedKey) -> str:
    return wrapped.kek_id.removeprefix(KMS_PREFIX)


async def test_a_data_key_wrapped_for_an_owner_unwraps_on_another_replica(
    kms: LocalKms, replicas: Replicas, owner: Owner
) -> None:
    a, b = replicas(), replicas()
    alice, data_key = owner("alice"), os.urandom(32)

    wrapped = await a.wrap(alice, data_key)

    assert wrapped.kek_id.startswith(f"{KMS_PREFIX}arn:aws:kms:{REGION}:{ACCOUNT}:key/")
    assert data_key not in wrapped.blob
    assert await b.unwrap(alice, wrapped) == data_key
    assert await a.unwrap(alice, wrapped) == data_key
    # The owner's key is found by its alias, named from a hash: no owner name in the KMS.
    status, found = kms.call("DescribeKey", {"KeyId": a.alias(alice)})
    assert status == 200
    assert found["KeyMetadata"]["Arn"] == key_id(wrapped)
    assert "alice" not in a.alias(alice)
    status, rotation = kms.call("GetKeyRotationStatus", {"KeyId": key_id(wrapped)})
    assert (status, rotation) == (200, {"KeyRotationEnabled": True})


async def test_one_key_per_owner(replicas: Replicas, owner: Owner) -> None:
    a, b = replicas(), replicas()
    alice, bob = owner("alice"), owner("bob")

    first = await a.wrap(alice, os.urandom(32))
    again = await b.wrap(alice, os.urandom(32))
    other = await a.wrap(bob, os.urandom(32))

    assert key_id(first) == key_id(again)
    assert key_id(other) != key_id(first)


async def test_a_wrapped_key_does_not_unwrap_for_another_owner(
    replicas: Replicas, owner: Owner
) -> None:
    a = replicas()
    alice, bob = owner("alice"), owner("bob")
    wrapped = await a.wrap(alice, os.urandom(32))

    with pytest.raises(KmsError) as refused:
        await a.unwrap(bob, wrapped)

    # Refused by the encryption context; not an erasure (bob's key is not alice's).
    assert refused.value.code == "InvalidCiphertextException"
    assert not isinstance(refused.value, KeyDestroyed)


def key_states(kms: LocalKms) -> dict[str, str]:
    """Every key the KMS holds, by ARN, with its state."""
    status, listed = kms.call("ListKeys", {"Limit": 1000})
    assert status == 200
    assert not listed.get("Truncated")
    return {
        k["KeyArn"]: kms.call("DescribeKey", {"KeyId": k["KeyArn"]})[1]["KeyMetadata"]["KeyState"]
        for k in listed["Keys"]
    }


async def test_replicas_creating_an_owners_key_at_once_end_with_one_key(
    kms: LocalKms, replicas: Replicas, owner: Owner
) -> None:
    carol = owner("carol")
    backends = [replicas() for _ in range(4)]
    keys = [os.urandom(32) for _ in backends]
    before = set(key_states(kms))

    wrapped = await asyncio.gather(*(b.wrap(carol, k) for b, k in zip(backends, keys, strict=True)))

    assert len({w.kek_id for w in wrapped}) == 1
    for w, k in zip(wrapped, keys, strict=True):
        assert await backends[0].unwrap(carol, w) == k
    # The key the alias names is the one enabled key made; every replica that lost the
    # race for the alias scheduled its own key for deletion.
    made = {arn: state for arn, state in key_states(kms).items() if arn not in before}
    assert made[key_id(wrapped[0])] == "Enabled"
    assert sorted(made.values()).count("Enabled") == 1
    assert set(made.values()) <= {"Enabled", "PendingDeletion"}


async def test_rotation_keeps_every_wrapped_key_readable(replicas: Replicas, owner: Owner) -> None:
    a, b = replicas(), replicas()
    alice = owner("alice")
    before_key = os.urandom(32)
    before = await a.wrap(alice, before_key)

    await a.rotate(alice)
    after_key = os.urandom(32)
    after = await a.wrap(alice, after_key)

    assert key_id(after) == key_id(before)
    assert (key_version(before), key_version(after)) == (0, 1)
    assert await b.unwrap(alice, before) == before_key
    assert await b.unwrap(alice, after) == after_key


async def test_destroy_makes_the_owners_wrapped_keys_unreadable_on_every_replica(
    kms: LocalKms, replicas: Replicas, owner: Owner
) -> None:
    a, b = replicas(), replicas()
    alice, bob = owner("alice"), owner("bob")
    alice_key, bob_key = os.urandom(32), os.urandom(32)
    wrapped = await a.wrap(alice, alice_key)
    await a.rotate(alice)
    rotated = await a.wrap(alice, alice_key)
    bobs = await b.wrap(bob, bob_key)
    assert await b.unwrap(alice, wrapped) == alice_key

    await a.destroy(alice)

    for replica in (a, b):
        for w in (wrapped, rotated):
            with pytest.raises(KeyDestroyed):
                await replica.unwrap(alice, w)
    assert await a.unwrap(bob, bobs) == bob_key
    status, meta = kms.call("DescribeKey", {"KeyId": key_id(wrapped)})
    assert status == 200
    assert meta["KeyMetadata"]["KeyState"] == "PendingDeletion"
    # Seven days from now, KMS's shortest waiting period.
    assert meta["KeyMetadata"]["DeletionDate"] - meta["KeyMetadata"]["CreationDate"] >= 7 * 86400
    status, gone = kms.call("DescribeKey", {"KeyId": a.alias(alice)})
    assert (status, gone["__type"]) == (400, "NotFoundException")


async def test_after_a_destroy_the_owner_gets_a_new_key(replicas: Replicas, owner: Owner) -> None:
    a, b = replicas(), replicas()
    alice = owner("alice")
    old = await a.wrap(alice, os.urandom(32))
    await a.destroy(alice)
    await b.destroy(alice)  # idempotent: a forget resumed after a crash destroys again

    new_key = os.urandom(32)
    new = await b.wrap(alice, new_key)

    assert key_id(new) != key_id(old)
    assert await a.unwrap(alice, new) == new_key
    with pytest.raises(KeyDestroyed):
        await a.unwrap(alice, old)


async def test_destroying_an_owner_without_a_key_does_nothing(
    replicas: Replicas, owner: Owner
) -> None:
    await replicas().destroy(owner("nobody"))


async def test_a_destroy_that_stopped_before_dropping_the_alias_is_finished(
    kms: LocalKms, replicas: Replicas, owner: Owner
) -> None:
    a = replicas()
    alice = owner("alice")
    old = await a.wrap(alice, os.urandom(32))
    # What a replica that died between the two steps of ``destroy`` left behind.
    status, _ = kms.call("ScheduleKeyDeletion", {"KeyId": key_id(old), "PendingWindowInDays": 7})
    assert status == 200

    with pytest.raises(KeyDestroyed):
        await a.unwrap(alice, old)
    new = await a.wrap(alice, os.urandom(32))
    await a.destroy(alice)

    assert key_id(new) != key_id(old)
    for w in (old, new):
        with pytest.raises(KeyDestroyed):
            await a.unwrap(alice, w)


async def test_a_key_disabled_by_hand_is_an_error_not_an_erasure(
    kms: LocalKms, replicas: Replicas, owner: Owner
) -> None:
    a = replicas()
    alice, data_key = owner("alice"), os.urandom(32)
    wrapped = await a.wrap(alice, data_key)
    assert kms.call("DisableKey", {"KeyId": key_id(wrapped)})[0] == 200

    with pytest.raises(KmsError) as refused:
        await a.unwrap(alice, wrapped)
    assert not isinstance(refused.value, KeyDestroyed)
    assert str(refused.value) == "KMS Decrypt answered HTTP 400 DisabledException"
    with pytest.raises(KmsError, match="the owner's KMS key is Disabled"):
        await a.wrap(alice, os.urandom(32))

    assert kms.call("EnableKey", {"KeyId": key_id(wrapped)})[0] == 200
    assert await a.unwrap(alice, wrapped) == data_key


async def test_a_key_wrapped_elsewhere_is_refused_not_erased(
    replicas: Replicas, owner: Owner
) -> None:
    a, alice = replicas(), owner("alice")
    with pytest.raises(KmsError, match=r"another key-encryption key \(secret:v1\)"):
        await a.unwrap(alice, WrappedKey("secret:v1", os.urandom(60)))
    # A KMS of another region would not find the key: a configuration error, not an erasure.
    elsewhere = f"{KMS_PREFIX}arn:aws:kms:us-east-1:{ACCOUNT}:key/{uuid.uuid4()}"
    with pytest.raises(KmsError, match=r"wrapped in another region \(us-east-1\)"):
        await a.unwrap(alice, WrappedKey(elsewhere, os.urandom(60)))


async def test_stores_sharing_a_kms_never_share_an_owners_key(kms: LocalKms, owner: Owner) -> None:
    one, two = kms.backend("ns-a/store/kaos_memory"), kms.backend("ns-b/store/kaos_memory")
    try:
        alice = owner("alice")
        first = await one.wrap(alice, os.urandom(32))
        second_key = os.urandom(32)
        second = await two.wrap(alice, second_key)
        assert key_id(first) != key_id(second)

        await one.destroy(alice)

        assert await two.unwrap(alice, second) == second_key
    finally:
        await one.close()
        await two.close()
