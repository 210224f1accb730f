"""Signed erasure receipts from a real service, on both backends: every forget answers with
one, the key served at the well-known path (without credentials) is the key that signed it,
the audit record keeps it, and the key survives a restart, or comes from a Secret's file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from kaos_core.memory.contract import RECEIPT_FORMAT, WELL_KNOWN_PATH
from kaos_core.memory.receipt import (
    ReceiptInvalid,
    canonical,
    key_id,
    public_keys,
    verify,
)

from tests.fixtures.memory import COLLECTION, MakeMemory, MemoryServer
from tests.support.memory_http import AGENT_A, call, headers, uid


async def served_key(server: MemoryServer) -> dict[str, Any]:
    status, jwks, hdrs = await call(server.url, WELL_KNOWN_PATH, method="GET")
    assert status == 200, jwks
    assert hdrs["Cache-Control"] == "public, max-age=300"
    return dict(jwks)


async def test_a_forget_is_signed_by_the_served_key_and_kept_in_the_audit(
    memory_service: MemoryServer,
) -> None:
    principal, session, request_id = uid("p"), uid("s"), uid("req")
    async with memory_service.client(agent=AGENT_A) as client:
        await client.write([("user", "my locker is 42")], session_id=session, principal=principal)
        forgotten = await client.forget(
            "session", session_id=session, principal=principal, request_id=request_id
        )
    receipt = forgotten.signed_receipt
    assert receipt is not None and forgotten.receipt is not None
    jwks = await served_key(memory_service)
    (jwk,) = jwks["keys"]
    assert jwk["kid"] == receipt.kid

    signed = receipt.model_dump(mode="json")
    doc = verify(canonical(signed), public_keys(jwks))
    assert doc == {
        "format": RECEIPT_FORMAT,
        "store": COLLECTION,  # no MemoryStore named to this service: its store group
        "erasure": forgotten.receipt,
        "request_id": request_id,
        "issued_at": doc["issued_at"],
        # The scope the erasure reached, as the audit names it: a session has no agent.
        "scope": {
            "level": "session",
            "principal": principal,
            "agent": None,
            "session": session,
        },
        "forgotten": {"short_term": 1, "medium_term": 0, "long_term": 0},
        "key_shredded": False,
        "final": True,
        "kid": jwk["kid"],
    }
    with pytest.raises(ReceiptInvalid, match="does not match"):
        verify(canonical(signed | {"final": False}), public_keys(jwks))

    # The audit record holds the very receipt the forget answered with, byte for byte.
    status, page, _ = await call(memory_service.url, "/v1/audit?limit=50", method="GET")
    assert status == 200
    record = next(r for r in page["records"] if r["id"] == forgotten.receipt)
    assert record["signed_receipt"] == signed
    (row,) = memory_service.db.relational(
        "SELECT receipt FROM kaos_mem_audit WHERE id = %s", (forgotten.receipt,)
    )
    assert row[0] == canonical(signed).decode()


async def test_the_well_known_key_needs_no_identity_and_an_admin_forget_is_signed_too(
    memory_service: MemoryServer,
) -> None:
    status, doc, _ = await call(
        memory_service.url, WELL_KNOWN_PATH, method="GET", hdrs={"X-Agent-Identity": "x"}
    )
    assert status == 200 and doc == await served_key(memory_service)
    principal = uid("p")
    status, answer, _ = await call(
        memory_service.url, "/v1/forget", {"level": "user"}, hdrs=headers(principal=principal)
    )
    assert status == 200, answer
    receipt = answer["signed_receipt"]
    assert receipt["scope"] == {"level": "user", "principal": principal, "agent": None,
                                "session": None}  # fmt: skip
    assert verify(canonical(receipt), public_keys(doc))["erasure"] == answer["receipt"]


async def test_the_generated_key_survives_a_restart(
    memory_factory: MakeMemory, tmp_path: Path
) -> None:
    data_dir = tmp_path / "kept"
    first = memory_factory("local", data_dir=data_dir)
    before = await served_key(first)
    assert first.stop() == 0
    second = memory_factory("local", data_dir=data_dir)

    assert await served_key(second) == before


async def test_a_key_file_signs_when_given(memory_factory: MakeMemory, tmp_path: Path) -> None:
    private = Ed25519PrivateKey.generate()
    key_file = tmp_path / "receipt-key.pem"
    key_file.write_bytes(private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    server = memory_factory("local", receipt_key_file=key_file)

    (jwk,) = (await served_key(server))["keys"]
    assert jwk["kid"] == key_id(private.public_key())
    async with server.client(agent=AGENT_A) as client:
        forgotten = await client.forget("agent", principal=uid("p"))
    assert forgotten.signed_receipt is not None
    assert forgotten.signed_receipt.kid == jwk["kid"]
