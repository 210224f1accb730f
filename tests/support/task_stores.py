"""What the A2A task store tests share: a clock the test moves, and the lease they use."""

from __future__ import annotations

LEASE = 30.0


class Clock:
    """Seconds as the test sets them (``now``), for a store's leases and retention."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now
