"""Readiness: named checks of the dependencies a service cannot serve without."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

ReadinessCheck = Callable[[], Awaitable[None]]


class Readiness:
    """Named readiness checks; ``/readyz`` is 200 only when every one passes in time.

    A check raises (anything) to say "not ready". Checks run concurrently with a timeout
    so a hung dependency makes the pod unready instead of hanging the probe.
    """

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout
        self._checks: dict[str, ReadinessCheck] = {}

    def add(self, name: str, check: ReadinessCheck) -> None:
        self._checks[name] = check

    async def evaluate(self) -> dict[str, str]:
        """Map each check name to ``"ok"`` or a short failure reason."""

        async def run(check: ReadinessCheck) -> str:
            try:
                await asyncio.wait_for(check(), self.timeout)
            except TimeoutError:
                return "timeout"
            except Exception as exc:  # noqa: BLE001  (any failure means not ready)
                return type(exc).__name__
            return "ok"

        names = list(self._checks)
        results = await asyncio.gather(*(run(self._checks[n]) for n in names))
        return dict(zip(names, results, strict=True))
