"""The public key a MemoryStore signs erasure receipts with, read from its Service.

The operator asks once the store's Deployment is available and reports the key in the
MemoryStore's ``status.receiptKey``, so ``kaos memory verify-receipt`` can check a receipt
against what the cluster records. The key is read rather than made here: only the memory
service knows which key it signs with (a Secret's file, or the key it generated once and
keeps in its conversation store), and the operator never holds a private key. The answer
is checked as far as it can be without the key's algorithm: one Ed25519 JWK whose ``kid``
is the RFC 7638 thumbprint of its ``x``.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Awaitable, Callable

from kaos_core.memory.contract import WELL_KNOWN_PATH
from kaos_core.tracing import client_session

from kaos_operator.tools import LIST_TIMEOUT

# (base URL of the store's Service) -> the key as ``status.receiptKey`` holds it.
ReceiptKeyReader = Callable[[str], Awaitable[dict[str, str]]]

READ_TIMEOUT = LIST_TIMEOUT
# A JWK Set of one key is a few hundred bytes.
MAX_BODY = 16 * 1024


class ReceiptKeyError(Exception):
    """The store answered, but not with one Ed25519 JWK (the message says what)."""


def thumbprint(x: str) -> str:
    """RFC 7638: SHA-256 over the required members, sorted, without whitespace."""
    members = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": x}, separators=(",", ":"))
    digest = hashlib.sha256(members.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def receipt_key(doc: object) -> dict[str, str]:
    """The one Ed25519 key of a JWK Set, as the status holds it."""
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(keys, list) or len(keys) != 1 or not isinstance(keys[0], dict):
        raise ReceiptKeyError("not a JWK Set of one key")
    key = keys[0]
    x, kid = key.get("x"), key.get("kid")
    if key.get("kty") != "OKP" or key.get("crv") != "Ed25519" or not isinstance(x, str):
        raise ReceiptKeyError("not an Ed25519 key")
    if len(x) != 43 or kid != thumbprint(x):
        raise ReceiptKeyError("kid is not the key's thumbprint")
    return {"kty": "OKP", "crv": "Ed25519", "x": x, "kid": kid}


async def read_receipt_key(url: str) -> dict[str, str]:
    """The receipt key the memory service at ``url`` serves, within ``READ_TIMEOUT``.

    Raises ``ReceiptKeyError``, ``aiohttp.ClientError``, ``ValueError`` (a body that is not
    JSON) or ``TimeoutError``; the caller reports the class."""
    async with (
        asyncio.timeout(READ_TIMEOUT),
        client_session() as http,
        http.get(url.rstrip("/") + WELL_KNOWN_PATH) as resp,
    ):
        if resp.status != 200:
            raise ReceiptKeyError(f"HTTP {resp.status}")
        body = await resp.content.read(MAX_BODY + 1)
    if len(body) > MAX_BODY:
        raise ReceiptKeyError(f"answer larger than {MAX_BODY} bytes")
    return receipt_key(json.loads(body))
