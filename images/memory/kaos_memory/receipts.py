"""Signed erasure receipts: the store's signing key, each forget's receipt, the public key.

Every forget answers with a receipt the store signs with Ed25519 (the form and how anyone
checks it: ``kaos_core.memory.receipt``), and the receipt goes onto the erasure's audit
record. The key is the PKCS#8 file ``KAOS_MEMORY_RECEIPT_KEY_FILE`` names (a mounted
Secret), else one generated once per store group and kept in the conversation store: the
first replica to start stores its key, every other replica and every restart reads that one,
so all replicas sign with the key ``GET /.well-known/kaos-memory-receipt-key`` serves
(unauthenticated: a public key, as a JWK Set).

A receipt says what the caller already knows and what the erasure did: the scope as the
caller named it (level, principal, agent, session), the rows per tier, whether the
principal's data key was shredded, whether the erasure was final, when, the request id,
the store, and the audit record's id. It never names the sessions a wider erasure reached
(other agents' sessions of the principal), the actor, or any content.
"""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
)
from kaos_core.logging import request_id_var
from kaos_core.memory.contract import RECEIPT_FORMAT, WELL_KNOWN_PATH, ErasureReceipt
from kaos_core.memory.receipt import (
    canonical,
    key_id,
    private_key_from_pem,
    public_jwk,
    sign,
)

from kaos_memory.clock import Clock, iso, wall_clock
from kaos_memory.erasure import ErasureResult
from kaos_memory.scope import Scope
from kaos_memory.settings.receipts import ReceiptSettings
from kaos_memory.storage.base import ConversationStore
from kaos_memory.storage.errors import StorageError

log = logging.getLogger(__name__)

# A client may keep the key this long; a rotated key (a new Secret) shows within it.
KEY_MAX_AGE_SECONDS = 300


@dataclass(frozen=True)
class Counts:
    short_term: int = 0
    medium_term: int = 0
    long_term: int = 0


@dataclass(frozen=True)
class Issued:
    """A signed receipt: the wire model, and the canonical bytes saved in the audit."""

    receipt: ErasureReceipt
    text: str


class ReceiptSigner:
    """One store's signing key and the name its receipts carry."""

    def __init__(
        self,
        private: Ed25519PrivateKey,
        *,
        store: str,
        source: str,
        clock: Clock = wall_clock,
    ) -> None:
        self._private = private
        self.store = store
        self.source = source
        self.clock = clock
        self.kid = key_id(private.public_key())
        self.jwks: dict[str, Any] = {"keys": [public_jwk(private.public_key())]}

    def issue(
        self,
        *,
        scope: Scope,
        counts: Counts,
        erasure: int | None,
        key_shredded: bool,
        final: bool,
        request_id: str,
    ) -> Issued:
        body: dict[str, Any] = {
            "format": RECEIPT_FORMAT,
            "store": self.store,
            "erasure": erasure,
            "request_id": request_id,
            "issued_at": iso(self.clock()),
            "scope": {
                "level": scope.level,
                "principal": scope.principal,
                "agent": scope.agent,
                "session": scope.session,
            },
            "forgotten": {
                "short_term": counts.short_term,
                "medium_term": counts.medium_term,
                "long_term": counts.long_term,
            },
            "key_shredded": key_shredded,
            "final": final,
        }
        signed = sign(body, self._private)
        return Issued(ErasureReceipt.model_validate(signed), canonical(signed).decode("utf-8"))


def store_label(namespace: str | None, name: str | None, group: str) -> str:
    """What a receipt names the store by: its MemoryStore when the operator said which,
    else the store group."""
    return f"{namespace}/{name}" if namespace and name else group


def _raw(private: Ed25519PrivateKey) -> str:
    raw = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return base64.urlsafe_b64encode(raw).decode("ascii")


async def load_signer(
    settings: ReceiptSettings,
    conversation: ConversationStore,
    *,
    group: str,
    store: str,
    clock: Clock = wall_clock,
) -> ReceiptSigner:
    """The signer of this store: the key file's key, else the group's stored key."""
    if settings.key_file is not None:
        # Checked when the settings were loaded; read again now, as the file is now.
        private = private_key_from_pem(settings.key_file.read_bytes())
        source = "file"
    else:
        stored = await conversation.receipt_signing_key(group, _raw(Ed25519PrivateKey.generate()))
        private = Ed25519PrivateKey.from_private_bytes(base64.urlsafe_b64decode(stored))
        source = "conversation store"
    signer = ReceiptSigner(private, store=store, source=source, clock=clock)
    log.info("receipt signing key", extra={"kid": signer.kid, "source": source})
    return signer


async def receipt_for(
    signer: ReceiptSigner, conversation: ConversationStore, scope: Scope, result: ErasureResult
) -> ErasureReceipt:
    """The signed receipt of an erasure, kept on its audit record; a receipt the audit could
    not keep is still given, and the erasure's answer is degraded ("audit record")."""
    erased = result.erased
    issued = signer.issue(
        scope=scope,
        counts=Counts(erased.turns, erased.digests, result.facts),
        erasure=erased.audit_id,
        key_shredded=result.key_shredded,
        final=result.final,
        request_id=request_id_var.get() or "",
    )
    if erased.audit_id is not None:
        try:
            await conversation.add_receipt(erased.audit_id, issued.text)
        except StorageError:
            log.error("keeping the receipt in the audit failed", exc_info=True)
            result.failures.append("audit record")
    return issued.receipt


RECEIPTS_KEY = web.AppKey("kaos_memory_receipts", ReceiptSigner)


async def receipt_key(request: web.Request) -> web.Response:
    """The public key receipts are signed with, as a JWK Set; no credential needed."""
    response = web.json_response(request.app[RECEIPTS_KEY].jwks)
    response.headers["Cache-Control"] = f"public, max-age={KEY_MAX_AGE_SECONDS}"
    return response


def add_receipt_routes(app: web.Application) -> None:
    app.router.add_get(WELL_KNOWN_PATH, receipt_key)
