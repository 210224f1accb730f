"""A sealed text: its format, and what binds it to its row.

Stored as text (every column that held plaintext keeps its type): ``~kx1:`` then the
base64 of the envelope ``version (1 byte) | key id (8) | nonce (12) | ciphertext + tag``.
The associated data is the store group, the owner and the record id (``record``: what
the row is, e.g. ``turn:<conversation key>/<rid>``), so a ciphertext copied to another
owner's row, or another row of the same owner, does not open. A text without the prefix is
plaintext (written before encryption was on, or with it off) and reads as it is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

PREFIX = "~kx1:"
VERSION = 1
KEY_ID_BYTES = 8
NONCE_BYTES = 12
# The base64 characters that cover the version byte and the key id (9 bytes: 12 chars).
_HEAD_CHARS = 12


class Unreadable(Exception):
    """Not a well-formed envelope, or it does not open (wrong key, row or owner)."""


# A sealed text's first characters: the prefix, the version and the key id. Every text one
# key sealed starts with the same head, so a key is looked up by it without decoding.
HEAD_LEN = len(PREFIX) + _HEAD_CHARS


def is_sealed(text: str) -> bool:
    return text.startswith(PREFIX)


def head(key_id: bytes) -> str:
    """The head of every text sealed under ``key_id``."""
    return PREFIX + base64.b64encode(bytes((VERSION,)) + key_id).decode()


def key_id_of(text: str) -> bytes | None:
    """The key id of a sealed text or head (None: plaintext, or not a well-formed one)."""
    if not text.startswith(PREFIX):
        return None
    try:
        raw = binascii.a2b_base64(text[len(PREFIX) : HEAD_LEN], strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    if len(raw) < 1 + KEY_ID_BYTES or raw[0] != VERSION:
        return None
    return raw[1 : 1 + KEY_ID_BYTES]


def associated(scope: bytes, record: str) -> bytes:
    """The associated data: ``scope`` (group and owner, ``owner_scope``) and the record."""
    return scope + record.encode()


def owner_scope(group: str, owner: str) -> bytes:
    # Length-prefixed, so no choice of group and owner reads as another.
    g, o = group.encode(), owner.encode()
    return b"%d:%s%d:%s" % (len(g), g, len(o), o)


def seal(aead: AESGCM, key_id: bytes, ad: bytes, text: str) -> str:
    return seal_under(aead, head(key_id), ad, text)


def seal_under(aead: AESGCM, key_head: str, ad: bytes, text: str) -> str:
    """``seal`` with the key's ``head`` already known (a key seals many texts)."""
    nonce = os.urandom(NONCE_BYTES)
    # The version and key id are 9 bytes, whole base64 groups: the base64 of the envelope
    # is the head's characters followed by those of the nonce and ciphertext.
    rest = binascii.b2a_base64(nonce + aead.encrypt(nonce, text.encode(), ad), newline=False)
    return key_head + rest.decode("ascii")


def open_sealed(aead: AESGCM, ad: bytes, text: str) -> str:
    try:
        body = binascii.a2b_base64(text[len(PREFIX) :], strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise Unreadable("not an envelope") from exc
    start = 1 + KEY_ID_BYTES
    nonce, ciphertext = body[start : start + NONCE_BYTES], body[start + NONCE_BYTES :]
    try:
        return aead.decrypt(nonce, ciphertext, ad).decode()
    except (InvalidTag, ValueError) as exc:
        raise Unreadable("the envelope does not open") from exc


def blind(key: bytes, token: str) -> str:
    """A keyed blind index of ``token`` (HMAC-SHA256, 16 hex chars): equal tokens of one
    owner match, and nothing about the token is stored."""
    return hmac.new(key, token.encode(), hashlib.sha256).hexdigest()[:16]


__all__ = [
    "HEAD_LEN",
    "KEY_ID_BYTES",
    "PREFIX",
    "Unreadable",
    "associated",
    "blind",
    "head",
    "is_sealed",
    "key_id_of",
    "open_sealed",
    "owner_scope",
    "seal",
    "seal_under",
]
