"""Local mode's single-writer guard: one process per data directory.

Embedded Chroma and the SQLite window are single-writer files; a second process on the
same directory (a second replica on a ReadWriteMany volume, a developer starting the
service twice) would corrupt them silently. An exclusive ``flock`` on a lock file in the
data dir is held for the life of the process; the kernel releases it when the process
dies, however it dies, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from kaos_core.errors import KaosError

LOCK_FILE = "kaos-memory.lock"


class DataDirInUse(KaosError):
    """Another process holds the local data directory."""

    code = "data_dir_in_use"


@contextlib.contextmanager
def exclusive_data_dir(data_dir: Path) -> Iterator[Path]:
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            raise DataDirInUse(
                f"the data directory {data_dir} is in use by another kaos-memory process "
                f"(pid {holder}): local mode is single-writer. Stop that process, or use "
                "KAOS_MEMORY_STORAGE=external for several replicas"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock
