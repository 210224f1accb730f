"""Time as the memory service reads it: one injectable clock instead of scattered calls.

A ``Clock`` returns the current time in seconds since the epoch. The service's parts take
one (default ``wall_clock``), so tests move time forward with a clock of their own
instead of waiting on it or granting leases already expired. Timestamps stored as text
use ``iso``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def __call__(self) -> float:
        """Seconds since the epoch, now."""
        ...


def wall_clock() -> float:
    return time.time()


def iso(seconds: float) -> str:
    """``seconds`` as the UTC ISO text the conversational tables store (microseconds)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="microseconds")
