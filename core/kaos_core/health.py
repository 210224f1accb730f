"""Readiness: named checks of the dependencies a service cannot serve without."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

ReadinessCheck = Callable[[], Awaitable[None]]


class Readiness:
    """Named readiness checks; ``/readyz`` is 200 only when every one passes in time.

    A check raises (anything) to say "not ready". Checks run concurrently with a timeout
    so a hung dependency makes the pod unready instead of hanging the probe. A failed
    check answers a fixed word: ``timeout``, the ``readiness_reason`` its exception's class
    declares, or ``unavailable``; what it raised goes to the log (under the probe's
    request id), never into the answer.
    """

    def __init__(self, timeout: float = 2.0) -> None:
        self.timeout = timeout
        self._checks: dict[str, ReadinessCheck] = {}

    def add(self, name: str, check: ReadinessCheck) -> None:
        self._checks[name] = check

    async def evaluate(self) -> dict[str, str]:
        """Map each check name to ``"ok"``, ``"timeout"`` or ``"unavailable"``."""

        async def run(name: str, check: ReadinessCheck) -> str:
            try:
                await asyncio.wait_for(check(), self.timeout)
            except TimeoutError:
                log.warning("readiness check timed out", extra={"check": name})
                return "timeout"
            except Exception as exc:  # any failure means not ready
                log.warning("readiness check failed", extra={"check": name}, exc_info=True)
                reason = getattr(type(exc), "readiness_reason", None)
                return reason if isinstance(reason, str) else "unavailable"
            return "ok"

        names = list(self._checks)
        results = await asyncio.gather(*(run(n, self._checks[n]) for n in names))
        return dict(zip(names, results, strict=True))
