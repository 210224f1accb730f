"""The key-encryption key (KEK): what wraps each owner's data key, outside the database.

A backend implements ``KeyEncryptionKey``. The Secret backend (``SecretFileKek``) reads a
versioned KEK from files mounted from a Kubernetes Secret: a directory holding one file per
version (``v1``, ``v2``, ...: 32 random bytes, base64) and ``current`` naming the version new
data keys are wrapped with. Rotation adds a version and points ``current`` at it; data keys
wrapped by an older version still unwrap, so nothing is re-encrypted. Its ``destroy`` does
nothing: deleting the owner's key row is the shred (a restored backup that still holds the
row is readable with the same KEK; a KMS backend closes that gap).

``check_seconds`` is how long a replica may use a data key it unwrapped before it checks the
key again (its row read again, the key unwrapped again): the longest a key destroyed by
another replica, or in the KMS by hand, still opens texts here.
"""

from __future__ import annotations

import base64
import binascii
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

CURRENT_FILE = "current"
SECRET_PREFIX = "secret:"
_NONCE = 12
KEY_BYTES = 32
# The Secret KEK destroys nothing itself: a forget deletes the owner's key row and every row
# it sealed in the same database, so another replica's cached key only bounds how long it
# could still open copies no read of that database returns.
SECRET_CHECK_SECONDS = 30.0


class KeyDestroyed(Exception):
    """The owner's key is gone (shredded, or unwrappable): their records read as erased."""


class KeyUnreadable(Exception):
    """This KEK cannot unwrap the key (another KEK wrapped it, or a version the Secret does
    not hold): a configuration problem, never an erasure. Reads leave the owner's texts
    out meanwhile; writes for the owner fail, and nothing is replaced."""


class KekUnavailable(Exception):
    """The KEK could not be reached now (a KMS outage): temporary, the caller retries."""


class KekError(Exception):
    """The KEK is missing or malformed (a configuration error, raised at start)."""


@dataclass(frozen=True)
class WrappedKey:
    # Which KEK (and version) wrapped it, e.g. "secret:v2" or "kms:<key id>".
    kek_id: str
    # The wrapped data key.
    blob: bytes


class KeyEncryptionKey(Protocol):
    # How long an unwrapped data key is used before it is checked again (module docstring).
    check_seconds: float

    async def wrap(self, owner: str, data_key: bytes) -> WrappedKey: ...

    async def unwrap(self, owner: str, wrapped: WrappedKey) -> bytes:
        """The data key; ``KeyDestroyed`` when it can no longer be unwrapped."""
        ...

    async def destroy(self, owner: str) -> None:
        """Crypto-shred what lives outside the database for ``owner``."""
        ...

    async def close(self) -> None: ...


def _read_version(directory: Path, version: str) -> bytes:
    try:
        raw = (directory / version).read_text().strip()
        key = base64.b64decode(raw, validate=True)
    except (OSError, binascii.Error, ValueError) as exc:
        raise KekError(f"KEK version {version!r} in {directory} is unreadable") from exc
    if len(key) != KEY_BYTES:
        raise KekError(f"KEK version {version!r} in {directory} is not {KEY_BYTES} bytes")
    return key


class SecretFileKek:
    """``KeyEncryptionKey`` over a versioned KEK directory (a mounted Secret).

    The directory is read again when a version it does not know is asked for, or when
    ``current`` changed: a rotated Secret reaches the pod without a restart.
    """

    check_seconds = SECRET_CHECK_SECONDS

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._versions: dict[str, AESGCM] = {}
        self._current: str | None = None
        self._lock = threading.Lock()

    def load(self) -> str:
        """Read ``current`` and its version; the current version. ``KekError`` if unusable."""
        try:
            current = (self.directory / CURRENT_FILE).read_text().strip()
        except OSError as exc:
            raise KekError(f"no {CURRENT_FILE} file in the KEK directory {self.directory}") from exc
        if not current or "/" in current or current.startswith("."):
            raise KekError(f"{CURRENT_FILE} in {self.directory} names no version")
        self._aead(current)
        self._current = current
        return current

    def _aead(self, version: str) -> AESGCM:
        with self._lock:
            aead = self._versions.get(version)
            if aead is None:
                aead = AESGCM(_read_version(self.directory, version))
                self._versions[version] = aead
            return aead

    def _current_version(self) -> str:
        # Read each time a key is wrapped (new owners only): rotation takes effect at once.
        return self.load()

    async def wrap(self, owner: str, data_key: bytes) -> WrappedKey:
        version = self._current_version()
        nonce = os.urandom(_NONCE)
        blob = nonce + self._aead(version).encrypt(nonce, data_key, owner.encode())
        return WrappedKey(kek_id=SECRET_PREFIX + version, blob=blob)

    async def unwrap(self, owner: str, wrapped: WrappedKey) -> bytes:
        if not wrapped.kek_id.startswith(SECRET_PREFIX):
            raise KeyUnreadable(f"key wrapped by another KEK ({wrapped.kek_id})")
        version = wrapped.kek_id[len(SECRET_PREFIX) :]
        try:
            aead = self._aead(version)
        except KekError as exc:
            raise KeyUnreadable(f"the KEK has no version {version!r}") from exc
        try:
            return aead.decrypt(wrapped.blob[:_NONCE], wrapped.blob[_NONCE:], owner.encode())
        except InvalidTag as exc:
            raise KeyUnreadable("the data key does not unwrap with this KEK") from exc

    async def destroy(self, owner: str) -> None:
        return None

    async def close(self) -> None:
        return None


def new_kek_version() -> str:
    """A new KEK version's file content (32 random bytes, base64)."""
    return base64.b64encode(os.urandom(KEY_BYTES)).decode()


__all__ = [
    "KekError",
    "KekUnavailable",
    "KeyDestroyed",
    "KeyEncryptionKey",
    "KeyUnreadable",
    "SecretFileKek",
    "WrappedKey",
    "new_kek_version",
]
