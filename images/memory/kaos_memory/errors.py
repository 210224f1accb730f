"""The storage error root, below every layer (``kaos_memory.storage.errors`` re-exports it)."""

from __future__ import annotations


class StorageError(Exception):
    """A store failed (permanent or unknown cause)."""


class StorageUnavailable(StorageError):
    """A store is temporarily unable to answer; the same call may succeed later."""
