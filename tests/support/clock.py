"""A clock that only moves when told to: the ``kaos_memory.clock.Clock`` tests hand in, so
expiry and back-off are exercised by moving time forward instead of waiting for it."""

from __future__ import annotations


class FakeClock:
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
