"""A sealed text opens only for its own row, owner and group."""

from __future__ import annotations

import base64
import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from kaos_memory.crypto import envelope

KEY_ID = bytes.fromhex("0102030405060708")


def _aead() -> AESGCM:
    return AESGCM(os.urandom(32))


def test_a_sealed_text_opens_for_its_row_and_names_its_key() -> None:
    aead = _aead()
    ad = envelope.associated(envelope.owner_scope("g", "principal:alice"), "turn:k/1")
    sealed = envelope.seal(aead, KEY_ID, ad, "alice's secret")
    assert sealed.startswith(envelope.PREFIX)
    assert "alice" not in sealed
    assert envelope.key_id_of(sealed) == KEY_ID
    assert envelope.open_sealed(aead, ad, sealed) == "alice's secret"


@pytest.mark.parametrize(
    ("group", "owner", "record"),
    [
        ("g", "principal:alice", "turn:k/2"),  # another row of the same owner
        ("g", "principal:bob", "turn:k/1"),  # the same row id under another owner
        ("h", "principal:alice", "turn:k/1"),  # another store group
        ("g", "principal:alic", "eturn:k/1"),  # the same bytes split differently
    ],
)
def test_a_sealed_text_moved_anywhere_else_does_not_open(
    group: str, owner: str, record: str
) -> None:
    aead = _aead()
    sealed = envelope.seal(
        aead,
        KEY_ID,
        envelope.associated(envelope.owner_scope("g", "principal:alice"), "turn:k/1"),
        "x",
    )
    elsewhere = envelope.associated(envelope.owner_scope(group, owner), record)
    with pytest.raises(envelope.Unreadable):
        envelope.open_sealed(aead, elsewhere, sealed)


def test_a_changed_byte_does_not_open() -> None:
    aead = _aead()
    ad = envelope.associated(b"s", "r")
    sealed = envelope.seal(aead, KEY_ID, ad, "text")
    body = bytearray(envelope.PREFIX.encode()) + bytearray(sealed[len(envelope.PREFIX) :].encode())
    i = len(body) - 5
    body[i] = ord("A") if body[i] != ord("A") else ord("B")
    with pytest.raises(envelope.Unreadable):
        envelope.open_sealed(aead, ad, body.decode())


def test_plaintext_and_garbage_name_no_key() -> None:
    assert envelope.key_id_of("hello") is None
    assert envelope.key_id_of(envelope.PREFIX + "!!!") is None
    assert not envelope.is_sealed("hello")


def test_the_blind_index_is_keyed() -> None:
    assert envelope.blind(b"k1", "paris") == envelope.blind(b"k1", "paris")
    assert envelope.blind(b"k1", "paris") != envelope.blind(b"k2", "paris")
    assert "paris" not in envelope.blind(b"k1", "paris")


def test_the_envelope_is_prefix_then_base64_of_version_key_nonce_and_ciphertext() -> None:
    # The stored format: a sealer that starts from the key's head must write the same bytes.
    aead = _aead()
    ad = envelope.associated(b"s", "turn:k/1")
    sealed = envelope.seal_under(aead, envelope.head(KEY_ID), ad, "text")
    assert sealed.startswith(envelope.head(KEY_ID))
    body = base64.b64decode(sealed[len(envelope.PREFIX) :], validate=True)
    assert body[:1] == bytes((envelope.VERSION,))
    assert body[1:9] == KEY_ID
    nonce, ciphertext = body[9:21], body[21:]
    assert aead.decrypt(nonce, ciphertext, ad) == b"text"
    assert envelope.open_sealed(aead, ad, envelope.seal(aead, KEY_ID, ad, "text")) == "text"
