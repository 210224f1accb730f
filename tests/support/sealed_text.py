"""Opening what a memory service sealed, for tests that read its databases directly.

With ``KAOS_TEST_MEMORY_ENCRYPTION=on`` every memory service the fixtures start seals its
texts under one Secret KEK of the test process (``suite_kek_dir``); the direct readers
(``tests.support.memory.MemoryDb``) then open turns, digests, fact payloads and Mem0's
messages with the key rows of the store and that KEK, as the service would. Texts whose
key is gone stay as stored (ciphertext), as they are unreadable to the service too.
"""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from kaos_memory.crypto import envelope
from kaos_memory.crypto.kek import SECRET_PREFIX, new_kek_version
from kaos_memory.crypto.keyring import DataKey

SWITCH = "KAOS_TEST_MEMORY_ENCRYPTION"

Rows = Callable[[str], list[tuple[object, ...]]]


def suite_encrypts() -> bool:
    """Whether this test run seals every fixture-started service's texts."""
    return os.environ.get(SWITCH, "") == "on"


def suite_kek_dir() -> Path:
    """The KEK every service of this test process shares: replicas of one store, and a
    service restarted over a data dir, unwrap each other's keys (one Secret per store)."""
    kek = Path(tempfile.gettempdir()) / f"kaos-test-kek-{os.getpid()}"
    if not (kek / "current").exists():
        kek.mkdir(parents=True, exist_ok=True)
        (kek / "v1").write_text(new_kek_version())
        (kek / "current").write_text("v1")
    return kek


def _unwrap(kek: Path, group: str, owner: str, kek_id: str, wrapped: str) -> bytes | None:
    if not kek_id.startswith(SECRET_PREFIX):
        return None
    version = kek_id[len(SECRET_PREFIX) :]
    blob = base64.b64decode(wrapped)
    aead = AESGCM(base64.b64decode((kek / version).read_text().strip()))
    try:
        return aead.decrypt(blob[:12], blob[12:], f"{group}/{owner}".encode())
    except InvalidTag:
        return None


class Opener:
    """Opens sealed texts with a store's key rows (read when made) and its KEK."""

    def __init__(self, kek: Path, rows: Rows) -> None:
        self._keys: dict[str, DataKey] = {}
        for key_id, group, owner, kek_id, wrapped in rows(
            "SELECT id, grp, owner, kek_id, wrapped FROM kaos_mem_keys"
        ):
            secret = _unwrap(kek, str(group), str(owner), str(kek_id), str(wrapped))
            if secret is not None:
                key = DataKey(bytes.fromhex(str(key_id)), str(group), str(owner), secret)
                self._keys[key.head] = key

    def open(self, text: object, record: str) -> object:
        if not isinstance(text, str) or not envelope.is_sealed(text):
            return text
        key = self._keys.get(text[: envelope.HEAD_LEN])
        if key is None:
            return text
        try:
            return key.open(text, record)
        except envelope.Unreadable:
            return text
