"""Clients of the session's Local KMS, each as one memory service replica makes it, closed
after the test; every test names its owners anew (``owner``), so tests share the KMS and
never each other's keys."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from kaos_memory.crypto.kms import KmsKeyEncryptionKey

from tests.support.kms import LocalKms

STORE = "kaos-tests/store/kaos_memory"


@pytest.fixture
def owner() -> Callable[[str], str]:
    """A fresh owner name per call, as the keyring qualifies it (``<group>/<owner>``)."""
    run = uuid.uuid4().hex[:8]
    return lambda name: f"kaos_memory/principal:{name}-{run}"


@pytest.fixture
async def replicas(kms: LocalKms) -> AsyncIterator[Callable[[], KmsKeyEncryptionKey]]:
    """Makes clients of the session KMS (one per replica), all closed at the end."""
    made: list[KmsKeyEncryptionKey] = []

    def replica() -> KmsKeyEncryptionKey:
        made.append(kms.backend(STORE))
        return made[-1]

    try:
        yield replica
    finally:
        for backend in made:
            await backend.close()
