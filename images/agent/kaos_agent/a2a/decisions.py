"""What the A2A server asks of approval gates (``kaos_agent.approvals.desk`` provides it):
pause a run that waits for a decision, take a decision sent to a paused task, decide the
overdue ones, and keep a chat run that paused as a task. The server resumes the decided
runs (``resume``, set by it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from a2a.types import a2a_pb2 as pb
from pydantic_ai.tools import DeferredToolResults

from kaos_agent.a2a.tasks import Claim
from kaos_agent.context import RunDeps, Verified
from kaos_agent.runner import Paused

# Resumes a decided task's run on this replica: the claim and the decisions; the run.
Resume = Callable[[Claim, DeferredToolResults], "asyncio.Task[None]"]


class Decisions(Protocol):
    resume: Resume | None

    async def hold(self, task_id: str, pause: Paused) -> bool:
        """Pause the task this replica runs until a decision; False: not its task now."""

    async def decide(
        self, message: pb.Message, deps: RunDeps, verified: Verified | None
    ) -> tuple[pb.Task, asyncio.Task[None]]:
        """Take the decision ``message`` carries; the task as decided and its resumed run."""

    async def approves_all(self, verified: Verified | None) -> bool:
        """Whether the caller may decide every user's paused runs (and so list them)."""

    async def pause_chat(self, prompt: str, deps: RunDeps, pause: Paused) -> str:
        """Keep a chat run that paused as a task; the answer naming it."""

    async def tick(self) -> None:
        """Decide the paused tasks past their deadline."""
