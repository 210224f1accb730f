"""A projected service-account token on disk, re-read when kubelet rotates it.

Kubelet replaces a projected token well before it expires (at 80% of its lifetime) by
swapping a symlink to a new file, so a caller must never keep the token it read at start:
``TokenFile.read()`` stats the path on every use (cheap) and reads the file again only
when its modification time, inode or size moved.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)


class TokenFile:
    """The current content of one token file; ``None`` while it is missing or empty."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int, int] | None = None
        self._token: str | None = None

    def read(self) -> str | None:
        try:
            stat = os.stat(self.path)  # follows kubelet's symlink to the current file
        except OSError:
            if self._stamp != (-1, -1, -1):
                log.warning("token file missing", extra={"path": str(self.path)})
                self._stamp, self._token = (-1, -1, -1), None
            return None
        stamp = (stat.st_mtime_ns, stat.st_ino, stat.st_size)
        if stamp != self._stamp:
            try:
                text = self.path.read_text(encoding="ascii").strip()
            except (OSError, UnicodeDecodeError):
                # Never log the content: it is a credential.
                log.warning("token file unreadable", extra={"path": str(self.path)})
                return None
            # A file caught half-written is read again on the next call (its size moves).
            self._stamp, self._token = stamp, text or None
        return self._token
