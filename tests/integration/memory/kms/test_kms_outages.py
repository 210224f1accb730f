"""A KMS of the test's own that stops and starts: its keys outlive a restart (the data
directory), and a KMS that does not answer is ``KmsUnavailable`` naming the operation and
the endpoint, with nothing of the driver's error, the key or the plaintext in it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from kaos_memory.crypto.kek import KeyDestroyed
from kaos_memory.crypto.kms import KmsUnavailable

from tests.support.kms import LocalKms

STORE = "kaos-tests/outages/kaos_memory"
ALICE, BOB = "kaos_memory/principal:alice", "kaos_memory/principal:bob"


@pytest.fixture
async def own_kms(tmp_path: Path) -> AsyncIterator[LocalKms]:
    server = LocalKms.start(tmp_path / "kms")
    try:
        yield server
    finally:
        server.stop()


async def test_a_restarted_kms_keeps_its_keys_rotations_and_destroys(own_kms: LocalKms) -> None:
    client = own_kms.backend(STORE)
    try:
        alice_key, rotated_key, bob_key = os.urandom(32), os.urandom(32), os.urandom(32)
        alice = await client.wrap(ALICE, alice_key)
        await client.rotate(ALICE)
        rotated = await client.wrap(ALICE, rotated_key)
        bob = await client.wrap(BOB, bob_key)
        await client.destroy(BOB)

        restarted = own_kms.restart()
        try:
            assert await client.unwrap(ALICE, alice) == alice_key
            assert await client.unwrap(ALICE, rotated) == rotated_key
            assert (await client.wrap(ALICE, os.urandom(32))).kek_id == alice.kek_id
            with pytest.raises(KeyDestroyed):
                await client.unwrap(BOB, bob)
        finally:
            restarted.stop()
    finally:
        await client.close()


async def test_a_kms_that_does_not_answer_is_unavailable(own_kms: LocalKms) -> None:
    client = own_kms.backend(STORE)
    try:
        data_key = os.urandom(32)
        wrapped = await client.wrap(ALICE, data_key)
        own_kms.stop()

        with pytest.raises(KmsUnavailable) as down:
            await client.unwrap(ALICE, wrapped)
        assert str(down.value) == (
            f"KMS Decrypt: no answer from {own_kms.endpoint} (ClientConnectorError)"
        )
        # The driver's error is chained for the log, never part of the message.
        assert isinstance(down.value.__cause__, aiohttp.ClientConnectorError)
        with pytest.raises(KmsUnavailable, match=r"^KMS DescribeKey: no answer from "):
            await client.wrap(BOB, data_key)
        with pytest.raises(KmsUnavailable, match=r"^KMS DescribeKey: no answer from "):
            await client.destroy(ALICE)
    finally:
        await client.close()
