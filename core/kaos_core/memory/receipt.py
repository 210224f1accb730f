"""Signed erasure receipts: the signed form, the public key's form, and offline verification.

A receipt is one JSON object the memory service signs with its Ed25519 key (RFC 8032) when
it answers a forget. Anyone holding the store's public key checks it without the service:

1. Parse the receipt (UTF-8 JSON, one object, no member given twice).
2. Take ``signature`` out: the base64url (RFC 4648 section 5, no padding) of the 64-byte
   Ed25519 signature.
3. Serialise the rest canonically, as RFC 8785 (JCS) does for these values: members sorted
   by name, no whitespace, strings as JSON requires and nothing more escaped, UTF-8. A
   receipt holds only strings, integers, booleans, ``null`` and objects of them, so this is
   Python's ``json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``.
4. Check the signature of those bytes with the key whose ``kid`` the receipt names: the
   RFC 7638 thumbprint of the key's JWK (``{"crv","kty","x"}``, SHA-256, base64url), so a
   key's id is a fact about the key, not a label anyone could reuse.

The service writes receipts in that canonical form with ``signature`` included, so every
byte of a saved receipt is covered: one changed byte makes it invalid or unparsable (the
signature itself is decoded strictly, so no spare bit of its last character is free). The
public key is served as a JWK Set (RFC 7517) at ``contract.WELL_KNOWN_PATH``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
)

from kaos_core.memory.contract import RECEIPT_FORMAT

ALGORITHM = "EdDSA"
SIGNATURE_FIELD = "signature"
# What a verifier reads before anything else; a receipt is a few hundred bytes.
MAX_RECEIPT_BYTES = 64 * 1024
_SIGNATURE_BYTES = 64
_KEY_BYTES = 32


class ReceiptInvalid(Exception):
    """The receipt does not verify; the message says why, naming no secret."""


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str, size: int, what: str) -> bytes:
    """``text`` as exactly ``size`` bytes of unpadded base64url, in its one canonical spelling."""
    try:
        raw = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError):
        raise ReceiptInvalid(f"{what} is not base64url") from None
    if len(raw) != size or b64url(raw) != text:
        raise ReceiptInvalid(f"{what} is not {size} bytes of unpadded base64url")
    return raw


def _check_values(value: object, where: str) -> None:
    if isinstance(value, Mapping):
        for name, item in value.items():
            if not isinstance(name, str):
                raise ValueError(f"{where}: member names are strings")
            _check_values(item, f"{where}.{name}")
    elif isinstance(value, list):
        for item in value:
            _check_values(item, where)
    elif not (value is None or isinstance(value, (str, bool, int))):
        # A float has more than one spelling; RFC 8785's number rule is not needed here.
        raise ValueError(f"{where}: a receipt holds strings, integers, booleans and null")


def canonical(doc: Mapping[str, Any]) -> bytes:
    """The one byte form of ``doc`` that is signed and saved (see the module docstring)."""
    _check_values(doc, "receipt")
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def key_id(public: Ed25519PublicKey) -> str:
    """The RFC 7638 JWK thumbprint of ``public``."""
    x = b64url(public.public_bytes(Encoding.Raw, PublicFormat.Raw))
    members = canonical({"crv": "Ed25519", "kty": "OKP", "x": x})
    return b64url(hashlib.sha256(members).digest())


def public_jwk(public: Ed25519PublicKey) -> dict[str, str]:
    """``public`` as a JWK (RFC 8037 ``OKP``/``Ed25519``) with its thumbprint as ``kid``."""
    return {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": b64url(public.public_bytes(Encoding.Raw, PublicFormat.Raw)),
        "kid": key_id(public),
        "alg": ALGORITHM,
        "use": "sig",
    }


def sign(body: Mapping[str, Any], private: Ed25519PrivateKey) -> dict[str, Any]:
    """``body`` with its ``kid`` and ``signature``: the receipt."""
    doc = {**body, "kid": key_id(private.public_key())}
    doc.pop(SIGNATURE_FIELD, None)
    return {**doc, SIGNATURE_FIELD: b64url(private.sign(canonical(doc)))}


def private_key_from_pem(data: bytes) -> Ed25519PrivateKey:
    """An Ed25519 private key from PKCS#8 PEM; ``ValueError`` saying what is wrong."""
    try:
        key = load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ValueError("not an unencrypted PKCS#8 PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("not an Ed25519 key (openssl genpkey -algorithm ed25519)")
    return key


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    for name, value in pairs:
        if name in doc:
            raise ReceiptInvalid(f"member {name!r} given twice")
        doc[name] = value
    return doc


def parse_json(data: bytes, what: str) -> Any:
    """UTF-8 JSON with every member once; ``ReceiptInvalid`` naming ``what`` otherwise."""
    if len(data) > MAX_RECEIPT_BYTES:
        raise ReceiptInvalid(f"{what} is larger than {MAX_RECEIPT_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ReceiptInvalid(f"{what} is not UTF-8") from None
    try:
        return json.loads(text, object_pairs_hook=_unique_members)
    except ValueError:
        raise ReceiptInvalid(f"{what} is not JSON") from None


def public_keys(doc: object) -> dict[str, Ed25519PublicKey]:
    """The Ed25519 keys of a JWK or a JWK Set, by their thumbprints."""
    if isinstance(doc, dict) and isinstance(doc.get("keys"), list):
        entries = doc["keys"]
    elif isinstance(doc, dict):
        entries = [doc]
    else:
        raise ReceiptInvalid("the key is not a JWK or a JWK Set")
    keys: dict[str, Ed25519PublicKey] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") != "OKP":
            continue
        if entry.get("crv") != "Ed25519" or not isinstance(entry.get("x"), str):
            continue
        public = Ed25519PublicKey.from_public_bytes(
            b64url_decode(entry["x"], _KEY_BYTES, "the key's x")
        )
        kid = key_id(public)
        if entry.get("kid") not in (None, kid):
            raise ReceiptInvalid("the key's kid is not its RFC 7638 thumbprint")
        keys[kid] = public
    if not keys:
        raise ReceiptInvalid("the key holds no Ed25519 public key (kty OKP, crv Ed25519)")
    return keys


def verify(data: bytes, keys: Mapping[str, Ed25519PublicKey]) -> dict[str, Any]:
    """The receipt in ``data`` once its signature checks with one of ``keys``."""
    doc = parse_json(data, "the receipt")
    if not isinstance(doc, dict):
        raise ReceiptInvalid("the receipt is not a JSON object")
    if doc.get("format") != RECEIPT_FORMAT:
        raise ReceiptInvalid(f"not a receipt of format {RECEIPT_FORMAT}")
    signature = doc.pop(SIGNATURE_FIELD, None)
    kid = doc.get("kid")
    if not isinstance(signature, str) or not isinstance(kid, str):
        raise ReceiptInvalid("the receipt has no signature or no kid")
    public = keys.get(kid)
    if public is None:
        raise ReceiptInvalid(f"signed with key {kid}, which the given key is not")
    raw = b64url_decode(signature, _SIGNATURE_BYTES, "the signature")
    try:
        body = canonical(doc)
    except ValueError:
        raise ReceiptInvalid("the receipt holds a value a receipt never holds") from None
    try:
        public.verify(raw, body)
    except InvalidSignature:
        raise ReceiptInvalid("the signature does not match the receipt") from None
    return doc
