"""Autonomous mode: a goal the agent pursues on its own schedule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kaos_core import agent_env as env
from kaos_core.settings import SettingsGroup, setting


class AutonomousMode(SettingsGroup):
    """The goal and the pace of autonomous iterations (no goal: the mode is off)."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Autonomous mode"

    goal: str | None = setting(
        "enables autonomous mode: the goal", env=env.AUTONOMOUS_GOAL, default=None
    )
    interval_seconds: float = setting(
        "pause between iterations", env=env.AUTONOMOUS_INTERVAL_SECONDS, default=60.0, gt=0
    )
    max_steps: int | None = setting(
        "model requests per iteration, 1 to 100",
        env=env.AUTONOMOUS_MAX_STEPS,
        default=None,
        default_doc="`REASONING_LOOP_MAX_STEPS`",
        ge=1,
        le=100,
    )
    timeout_seconds: float = setting(
        "wall time per iteration", env=env.AUTONOMOUS_TIMEOUT_SECONDS, default=300.0, gt=0
    )


@dataclass(frozen=True)
class AutonomousSettings:
    """What the autonomous loop runs: the goal, its pace, and its owner."""

    goal: str
    interval_seconds: float
    max_steps: int
    timeout_seconds: float
    # The run's principal and session: the agent itself, one stable session per agent.
    owner: str
    session_id: str
