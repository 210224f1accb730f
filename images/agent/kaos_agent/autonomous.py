"""Autonomous mode: the agent pursues a configured goal on its own schedule.

Each iteration is one ordinary run (same memory rules, same tools) with its own step
and time budget. Its owner is the agent itself: the principal is the agent's identity
(the loop's bearer self-subjects the run) and the session is one stable id per agent,
so iterations see each other's window. A failed iteration is logged and counted; the
loop goes on at the next interval.
"""

from __future__ import annotations

import asyncio
import logging
import uuid

from kaos_core.errors import KaosError

from kaos_agent.context import RunDeps
from kaos_agent.runner import AgentRuntime
from kaos_agent.settings import AgentSettings

log = logging.getLogger(__name__)


def autonomous_deps(settings: AgentSettings) -> RunDeps:
    owner = settings.identity or f"agent:{settings.name}"
    return RunDeps(
        session_id=f"autonomous-{settings.name}",
        principal=owner,
        autonomous=True,
    )


async def autonomous_loop(settings: AgentSettings, runtime: AgentRuntime) -> None:
    goal = settings.autonomous_goal
    if not goal:
        return
    iteration = 0
    while True:
        iteration += 1
        deps = autonomous_deps(settings)
        deps = RunDeps(
            session_id=deps.session_id,
            principal=deps.principal,
            autonomous=True,
            request_id=f"auto-{iteration}-{uuid.uuid4().hex[:8]}",
        )
        try:
            outcome = await runtime.run(
                goal,
                deps,
                entry="autonomous",
                max_steps=settings.autonomous_max_steps or settings.max_steps,
                timeout=settings.autonomous_timeout_seconds,
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
        await asyncio.sleep(settings.autonomous_interval_seconds)
