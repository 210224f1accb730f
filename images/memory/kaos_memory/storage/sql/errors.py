"""SQLite and PostgreSQL driver errors as the storage error family (``storage.errors``)."""

from __future__ import annotations

import sqlite3
import sys

from kaos_memory.storage.errors import StorageError, StorageUnavailable


def wrap(exc: BaseException) -> StorageError | None:
    """The storage error for a driver error; ``None`` for anything that is not one."""
    if isinstance(exc, sqlite3.OperationalError):  # locked, busy, I/O, disk full
        return StorageUnavailable("conversation store unavailable")
    if isinstance(exc, sqlite3.Error):
        return StorageError("conversation store failed")
    # psycopg is loaded only in external mode (an optional driver): none of its errors
    # can occur before.
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        # Connection lost or refused, pool timeout or closed (psycopg_pool's errors are
        # OperationalErrors too): temporary.
        if isinstance(exc, psycopg.OperationalError):
            return StorageUnavailable("conversation store unavailable")
        if isinstance(exc, psycopg.Error):
            return StorageError("conversation store failed")
    return None
