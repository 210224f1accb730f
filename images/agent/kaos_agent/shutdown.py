"""SIGTERM on a served agent: drain while still listening, then shut down.

Served by ``run_service`` (aiohttp's runner handles SIGTERM by shutting the server down at
once), the agent takes the signal over: readiness turns 503 and new runs are refused while
the server still listens, so the Service stops sending it requests and callers see why;
running tasks get the grace period, and those still running then are handed over to
another replica (a shared store) or failed (``kaos_agent.a2a.runs``); then the runner shuts
down as it would have (``GracefulExit``). A second SIGTERM shuts down at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator

from aiohttp import web

from kaos_agent.a2a.runs import TaskRuns

log = logging.getLogger(__name__)


@contextlib.contextmanager
def drain_on_sigterm(runs: TaskRuns, grace_seconds: float) -> Iterator[None]:
    """While served by a runner that handles SIGTERM, take the signal over: drain while
    still listening, then let the runner shut down (``GracefulExit``, as it would have).
    A second SIGTERM shuts down at once."""
    loop = asyncio.get_running_loop()
    # The loop's own handler is installed (asyncio's no-op stands in the signal module)
    # only when the runner handles signals; tests serving the app in their loop do not.
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, signal.SIG_IGN, None):
        yield
        return
    draining: list[asyncio.Task[None]] = []

    def exit_now() -> None:
        raise web.GracefulExit()

    async def drain_then_exit() -> None:
        await runs.drain(grace_seconds)
        loop.call_soon(exit_now)

    def on_sigterm() -> None:
        if draining:
            exit_now()
        log.info("SIGTERM: draining before shutdown")
        draining.append(loop.create_task(drain_then_exit()))

    try:
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    except (ValueError, RuntimeError, NotImplementedError):  # not the main thread's loop
        yield
        return
    try:
        yield
    finally:
        for task in draining:
            task.cancel()
