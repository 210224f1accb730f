"""Autonomous mode: the agent pursues a configured goal on its own schedule.

Each iteration is one ordinary run (same memory rules, same tools) with its own step
and time budget. Its owner is the agent itself: the principal is the agent's identity
and the session is one stable id per agent, so iterations see each other's window. The
run context goes through the same parser as a request's (``run_context``), from the
headers a request of the agent itself would carry. A failed iteration is logged and
counted; the loop goes on at the next interval.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from kaos_core.errors import KaosError
from kaos_core.logging import request_id_var
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER

from kaos_agent.context import RunDeps, run_context
from kaos_agent.runner import AgentRuntime
from kaos_agent.settings import AutonomousSettings

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[None]]


def autonomous_deps(settings: AutonomousSettings, iteration: int) -> RunDeps:
    """The run context of one iteration, with its own request id."""
    return run_context(
        {SESSION_HEADER: settings.session_id, PRINCIPAL_HEADER: settings.owner},
        request_id=f"auto-{iteration}-{uuid.uuid4().hex[:8]}",
    )


async def autonomous_loop(
    settings: AutonomousSettings, runtime: AgentRuntime, *, sleep: Sleep = asyncio.sleep
) -> None:
    iteration = 0
    while True:
        iteration += 1
        deps = autonomous_deps(settings, iteration)
        token = request_id_var.set(deps.request_id)
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
        await sleep(settings.interval_seconds)
