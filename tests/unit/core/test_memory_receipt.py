"""The signed erasure receipt's form (``kaos_core.memory.receipt``): what verifies, and that
no single changed byte of a saved receipt does."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from kaos_core.memory.contract import RECEIPT_FORMAT, ErasureReceipt
from kaos_core.memory.receipt import (
    ReceiptInvalid,
    canonical,
    key_id,
    private_key_from_pem,
    public_jwk,
    public_keys,
    sign,
    verify,
)

# RFC 8037 appendix A.1/A.3: the Ed25519 test key and its RFC 7638 thumbprint.
RFC_SEED = "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A"
RFC_X = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
RFC_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def _body(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "format": RECEIPT_FORMAT,
        "store": "team-a/mem",
        "erasure": 7,
        "request_id": "4f1c0d",
        "issued_at": "2026-12-05T19:52:23.000000+00:00",
        "scope": {"level": "user", "principal": "alice", "agent": None, "session": None},
        "forgotten": {"short_term": 3, "medium_term": 1, "long_term": 12},
        "key_shredded": False,
        "final": True,
    }
    return body | changes


@pytest.fixture(scope="module")
def private() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def test_the_key_id_is_the_rfc7638_thumbprint_of_the_rfc8037_key() -> None:
    seed = base64.urlsafe_b64decode(RFC_SEED + "=")
    public = Ed25519PrivateKey.from_private_bytes(seed).public_key()

    jwk = public_jwk(public)

    assert jwk["x"] == RFC_X
    assert key_id(public) == jwk["kid"] == RFC_THUMBPRINT
    assert (jwk["kty"], jwk["crv"], jwk["alg"]) == ("OKP", "Ed25519", "EdDSA")


def test_a_signed_receipt_verifies_with_the_jwk_or_the_jwk_set(private: Ed25519PrivateKey) -> None:
    receipt = sign(_body(), private)
    data = canonical(receipt)
    jwk = public_jwk(private.public_key())

    for key in (jwk, {"keys": [jwk]}, {k: v for k, v in jwk.items() if k != "kid"}):
        doc = verify(data, public_keys(key))
        assert doc == {**_body(), "kid": jwk["kid"]}
    # Formatting is not signed: the same receipt pretty-printed verifies too.
    assert verify(json.dumps(receipt, indent=2).encode(), public_keys(jwk))["erasure"] == 7


def test_the_canonical_form_is_sorted_compact_utf8() -> None:
    assert canonical({"b": 1, "a": {"d": None, "c": "é\n"}}) == (
        '{"a":{"c":"é\\n","d":null},"b":1}'.encode()
    )
    with pytest.raises(ValueError, match="strings, integers"):
        canonical({"a": 1.5})


def test_no_single_changed_byte_verifies(private: Ed25519PrivateKey) -> None:
    data = canonical(sign(_body(), private))
    keys = public_keys(public_jwk(private.public_key()))
    assert verify(data, keys)

    passed = []
    for i in range(len(data)):
        for replacement in {data[i] ^ 0x01, data[i] ^ 0x20, ord("0"), ord("A")} - {data[i]}:
            changed = data[:i] + bytes([replacement]) + data[i + 1 :]
            try:
                verify(changed, keys)
            except ReceiptInvalid:
                continue
            passed.append((i, chr(replacement)))
    assert passed == []


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lambda r: r | {"forgotten": r["forgotten"] | {"long_term": 0}}, "does not match"),
        (lambda r: r | {"final": False}, "does not match"),
        (lambda r: r | {"extra": "added"}, "does not match"),
        (lambda r: {k: v for k, v in r.items() if k != "signature"}, "no signature"),
        (lambda r: r | {"kid": "someone-else"}, "signed with key someone-else"),
        (lambda r: r | {"format": "other/v1"}, "not a receipt of format"),
        (lambda r: r | {"signature": r["signature"][:-2]}, "not 64 bytes"),
        (lambda r: r | {"signature": "!" * 86}, "not base64url"),
    ],
)
def test_a_tampered_receipt_says_why(private: Ed25519PrivateKey, tamper: Any, message: str) -> None:
    keys = public_keys(public_jwk(private.public_key()))
    with pytest.raises(ReceiptInvalid, match=message):
        verify(canonical(tamper(sign(_body(), private))), keys)


def test_another_key_and_malformed_documents_are_refused(private: Ed25519PrivateKey) -> None:
    data = canonical(sign(_body(), private))
    other = public_keys(public_jwk(Ed25519PrivateKey.generate().public_key()))
    with pytest.raises(ReceiptInvalid, match="signed with key"):
        verify(data, other)
    keys = public_keys(public_jwk(private.public_key()))
    twice = data[:-1] + b',"final":false}'
    with pytest.raises(ReceiptInvalid, match="'final' given twice"):
        verify(twice, keys)
    for bad, message in ((b"\xff{}", "not UTF-8"), (b"[1]", "not a JSON object"),
                         (b"{", "not JSON")):  # fmt: skip
        with pytest.raises(ReceiptInvalid, match=message):
            verify(bad, keys)


def test_a_jwk_whose_kid_is_not_its_thumbprint_is_refused(private: Ed25519PrivateKey) -> None:
    jwk = public_jwk(private.public_key())
    with pytest.raises(ReceiptInvalid, match="not its RFC 7638 thumbprint"):
        public_keys(jwk | {"kid": "chosen"})
    with pytest.raises(ReceiptInvalid, match="no Ed25519 public key"):
        public_keys({"keys": [{"kty": "RSA", "n": "x", "e": "AQAB"}]})


def test_the_wire_model_round_trips_to_the_signed_bytes(private: Ed25519PrivateKey) -> None:
    # A client parses the forget's answer and saves the receipt from its model: unknown
    # members survive, so a newer service's receipt still verifies.
    receipt = sign(_body(note="from a newer service"), private)
    model = ErasureReceipt.model_validate(receipt)

    assert canonical(model.model_dump(mode="json")) == canonical(receipt)


def test_pem_keys_load_and_other_keys_are_refused(private: Ed25519PrivateKey) -> None:
    pem = private.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    assert key_id(private_key_from_pem(pem).public_key()) == key_id(private.public_key())
    with pytest.raises(ValueError, match="PKCS#8 PEM"):
        private_key_from_pem(b"not a key")
    digest = hashlib.sha256(b"x").hexdigest()
    with pytest.raises(ValueError, match="PKCS#8 PEM"):
        private_key_from_pem(digest.encode())
