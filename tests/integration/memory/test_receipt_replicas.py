"""Replicas share the receipt signing key: two services in external mode on one PostgreSQL
serve the same key, and a receipt one of them signed verifies with the key the other serves."""

from __future__ import annotations

import pytest
from kaos_core.memory.contract import WELL_KNOWN_PATH
from kaos_core.memory.receipt import canonical, public_keys, verify

from tests.fixtures.memory import MakeMemory
from tests.support.memory_http import AGENT_A, call, uid

pytestmark = [pytest.mark.postgres]


async def test_two_replicas_sign_with_one_key(memory_factory: MakeMemory) -> None:
    first, second = memory_factory("external"), memory_factory("external")
    assert first.db.dsn == second.db.dsn
    keys = []
    for server in (first, second):
        status, jwks, _ = await call(server.url, WELL_KNOWN_PATH, method="GET")
        assert status == 200
        keys.append(jwks)
    assert keys[0] == keys[1]
    assert len(first.db.relational("SELECT grp FROM kaos_mem_receipt_keys")) == 1

    principal = uid("p")
    receipts = []
    for server in (first, second):
        async with server.client(agent=AGENT_A) as client:
            answer = await client.forget("agent", principal=principal)
        assert answer.signed_receipt is not None
        receipts.append(canonical(answer.signed_receipt.model_dump(mode="json")))
    # Each replica's receipt checks with the key the other one serves.
    assert verify(receipts[0], public_keys(keys[1]))["erasure"] is not None
    assert verify(receipts[1], public_keys(keys[0]))["erasure"] is not None
