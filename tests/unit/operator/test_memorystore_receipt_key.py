"""status.receiptKey: read from the store's Service once its Deployment is available, from
the memory service's own well-known route on loopback (the reader and the reconciler are
real); kept when a later read fails, refused when the key's id is not its thumbprint."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from kaos_core.memory.receipt import public_jwk
from kaos_memory.receipts import RECEIPTS_KEY, ReceiptSigner, add_receipt_routes
from kaos_operator.receipt_key import ReceiptKeyError, read_receipt_key, receipt_key
from kaos_operator.reconcilers import Outcome, build_reconcilers

from tests.support.loopback import served
from tests.support.operator_context import FakeContext, raw, ready_model_api

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
ROLES = {"summarization": {"modelAPI": "hosted"}, "embedding": {"modelAPI": "hosted"}}


@dataclass
class Store:
    """The memory service's key route on loopback, and what the reconciler asked."""

    signer: ReceiptSigner
    port: int = 0
    asked: list[str] = field(default_factory=list)
    failing: bool = False

    async def read(self, url: str) -> dict[str, str]:
        # The Service's name resolves only in the cluster: the same read, to this process.
        self.asked.append(url)
        if self.failing:
            return await read_receipt_key(f"http://127.0.0.1:{self.port}/down")
        return await read_receipt_key(f"http://127.0.0.1:{self.port}")


@pytest.fixture
async def store() -> AsyncIterator[Store]:
    app = web.Application()
    signer = ReceiptSigner(Ed25519PrivateKey.generate(), store="ns/mem", source="test")
    app[RECEIPTS_KEY] = signer
    add_receipt_routes(app)
    state = Store(signer)
    async with served(app) as port:
        state.port = port
        yield state


async def test_the_key_is_read_once_the_store_is_available_and_kept(store: Store) -> None:
    ctx = FakeContext()
    ready_model_api(ctx, "hosted")
    ctx.add(raw("MemoryStore", "mem", {"models": ROLES}))
    rec = build_reconcilers(ctx, clock=lambda: T0, receipt_key_reader=store.read)["MemoryStore"]
    assert await rec.reconcile("ns", "mem") == Outcome.OK
    assert "receiptKey" not in ctx.status_of("MemoryStore", "ns", "mem")
    assert store.asked == []  # not up yet

    ctx.deployment_available("ns", "mem")
    await rec.reconcile("ns", "mem")
    # The read runs beside the reconcile, which does not wait for it: its end wakes the store.
    assert "receiptKey" not in ctx.status_of("MemoryStore", "ns", "mem")
    await ctx.woken("MemoryStore", "ns", "mem")
    await rec.reconcile("ns", "mem")
    jwk = store.signer.jwks["keys"][0]
    expected = {k: jwk[k] for k in ("kty", "crv", "x", "kid")}
    assert ctx.status_of("MemoryStore", "ns", "mem")["receiptKey"] == expected
    assert store.asked == ["http://mem.ns.svc:8080"]
    await rec.reconcile("ns", "mem")
    assert len(store.asked) == 1  # same generation: not read again

    # A new generation whose read fails: read again later, the key last read stays.
    store.failing = True
    updated = raw("MemoryStore", "mem", {"models": ROLES})
    updated["metadata"]["generation"] = 2
    ctx.add({**updated, "status": ctx.status_of("MemoryStore", "ns", "mem")})
    await rec.reconcile("ns", "mem")
    assert ctx.status_of("MemoryStore", "ns", "mem")["receiptKey"] == expected
    await ctx.woken("MemoryStore", "ns", "mem")
    await rec.reconcile("ns", "mem")
    assert len(store.asked) == 2
    assert ctx.status_of("MemoryStore", "ns", "mem")["receiptKey"] == expected
    recheck = rec.take_recheck("ns", "mem")
    assert recheck is not None and 0 < recheck <= 2.0
    # Reconciled again before that delay (another event queued it): no read, same failure.
    await rec.reconcile("ns", "mem")
    assert len(store.asked) == 2
    assert ctx.requeued == []


def test_a_key_whose_id_is_not_its_thumbprint_is_refused() -> None:
    jwk = public_jwk(Ed25519PrivateKey.generate().public_key())
    assert receipt_key({"keys": [jwk]})["kid"] == jwk["kid"]
    for doc, message in (
        ({"keys": [jwk | {"kid": "chosen"}]}, "kid is not the key's thumbprint"),
        ({"keys": [jwk | {"crv": "X25519"}]}, "not an Ed25519 key"),
        ({"keys": [jwk, jwk]}, "not a JWK Set of one key"),
        (jwk, "not a JWK Set of one key"),
    ):
        with pytest.raises(ReceiptKeyError, match=message):
            receipt_key(doc)
