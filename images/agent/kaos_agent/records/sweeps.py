"""A record set's retention sweep: once as the app starts (before it serves), then every
``SWEEP_SECONDS`` while it runs. Every replica sweeps (a delete of what is already gone is
harmless); a failed sweep is logged (the store logs why) and left to the next."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from kaos_core.errors import KaosError

log = logging.getLogger(__name__)

SWEEP_SECONDS = 3600.0

Sleep = Callable[[float], Awaitable[None]]
# Deletes what is past its retention (the cut-off read from the clock at each call); how
# many records, when the store counts them.
Sweep = Callable[[], Awaitable[int | None]]


async def sweep_once(sweep: Sweep, what: str) -> None:
    try:
        deleted = await sweep()
    except KaosError:
        log.warning("a retention sweep failed", extra={"records": what})
        return
    if deleted:
        log.info("records past their retention deleted", extra={"records": what, "count": deleted})


@contextlib.asynccontextmanager
async def sweeping(
    sweep: Sweep, what: str, *, sleep: Sleep = asyncio.sleep, every: float = SWEEP_SECONDS
) -> AsyncIterator[None]:
    """Sweep ``what`` now and every ``every`` seconds until the block ends."""
    await sweep_once(sweep, what)

    async def repeat() -> None:
        while True:
            await sleep(every)
            await sweep_once(sweep, what)

    sweeper = asyncio.create_task(repeat())
    try:
        yield
    finally:
        sweeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sweeper
