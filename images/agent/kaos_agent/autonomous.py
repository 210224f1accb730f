"""Autonomous mode: the agent pursues a configured goal on its own schedule.

Each iteration is one ordinary run (same memory rules, same tools) with its own step
and time budget. Its owner is the agent itself: the principal is the agent's identity
and the session is one stable id per agent, so iterations see each other's window. The
run context goes through the same parser as a request's (``run_context``), from the
headers a request of the agent itself would carry. A failed iteration is logged and
counted; the loop goes on at the next interval.

With replicas sharing a task store, each interval's iteration runs once per Agent, not
once per replica: before an iteration the loop takes (or keeps) the store's named lease
(``claim``), and a replica that finds it held by another skips that iteration. A store
that cannot be asked skips it too (one iteration late beats two at once). Alone (a store
of its own), a replica runs every iteration, as before.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from kaos_core.errors import KaosError
from kaos_core.logging import request_id_var
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER
from prometheus_client import Gauge

from kaos_agent.context import RunDeps, run_context
from kaos_agent.runner import AgentRuntime
from kaos_agent.settings import AutonomousSettings

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]
# Whether this replica runs the coming iteration (False: another one does).
Claim = Callable[[], Awaitable[bool]]


def autonomous_deps(settings: AutonomousSettings, iteration: int) -> RunDeps:
    """The run context of one iteration, with its own request id."""
    return run_context(
        {SESSION_HEADER: settings.session_id, PRINCIPAL_HEADER: settings.owner},
        request_id=f"auto-{iteration}-{uuid.uuid4().hex[:8]}",
    )


async def _claimed(claim: Claim | None) -> bool:
    if claim is None:
        return True
    try:
        return await claim()
    except KaosError as exc:
        log.warning("autonomous iteration skipped", extra={"error": exc.message})
        return False


async def autonomous_loop(
    settings: AutonomousSettings,
    runtime: AgentRuntime,
    *,
    sleep: Sleep = asyncio.sleep,
    claim: Claim | None = None,
    in_flight: Gauge | None = None,
) -> None:
    iteration = 0
    while True:
        iteration += 1
        if not await _claimed(claim):
            log.debug("autonomous iteration run by another replica")
            await sleep(settings.interval_seconds)
            continue
        deps = autonomous_deps(settings, iteration)
        token = request_id_var.set(deps.request_id)
        if in_flight is not None:
            in_flight.inc()
        try:
            outcome = await runtime.run(
                settings.goal,
                deps,
                entry="autonomous",
                max_steps=settings.max_steps,
                timeout=settings.timeout_seconds,
            )
            log.info(
                "autonomous iteration done",
                extra={"iteration": iteration, "finish": outcome.finish_reason},
            )
        except KaosError as exc:
            log.warning(
                "autonomous iteration failed", extra={"iteration": iteration, "error": exc.message}
            )
        except Exception:  # the loop outlives one bad iteration
            log.exception("autonomous iteration crashed", extra={"iteration": iteration})
        finally:
            request_id_var.reset(token)
            if in_flight is not None:
                in_flight.dec()
        await sleep(settings.interval_seconds)
