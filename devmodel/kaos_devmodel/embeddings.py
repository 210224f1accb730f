"""Deterministic embeddings from a hashed bag of words.

A text's tokens are its lowercase runs of letters and digits. Each token is hashed with
BLAKE2b into an index in ``[0, dims)`` and a sign; the signed counts are summed and the
vector is scaled to unit length. Texts that share words therefore have a higher cosine
similarity than unrelated texts (whose expected cosine is 0), the same text always gets
the same vector, and no model file is needed. A text without tokens gets a fixed unit
vector, so no vector is ever zero (cosine similarity would be undefined).
"""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct

_TOKEN_RE = re.compile(r"[^\W_]+")


def tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text.lower())


def _slot(token: str, dims: int) -> tuple[int, float]:
    digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    # Low bits choose the index, the top bit the sign, so the two are independent.
    return value % dims, (1.0 if value >> 63 else -1.0)


def embed(text: str, dims: int) -> list[float]:
    """The unit vector of ``text`` in ``dims`` dimensions."""
    vec = [0.0] * dims
    for token in tokens(text):
        index, sign = _slot(token, dims)
        vec[index] += sign
    norm = math.sqrt(sum(x * x for x in vec))
    if norm == 0.0:
        # No tokens, or signs that cancelled out: a fixed unit vector instead of zero.
        vec[0] = 1.0
        return vec
    return [x / norm for x in vec]


def encode_base64(vec: list[float]) -> str:
    """OpenAI's ``encoding_format: base64``: little-endian float32, base64-encoded."""
    return base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
