"""Autonomous mode: the goal runs on a schedule, owned by the agent itself.

The agent is served in the test's loop with its own ``sleep`` (``AgentDeps``): each
iteration ends by calling it, so the test counts iterations without waiting on a clock,
and the loop parks after the second one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from kaos_agent.app import AgentDeps
from kaos_core.memory.client import MemoryServiceClient

from tests.fixtures.agent import agent_env, recording_memory, serve_agent
from tests.support.devmodel import DevModel
from tests.support.procs import free_port

IDENTITY = "kaos://agent/test/auto"
GOAL = "patrol the perimeter"


class Iterations:
    """A ``sleep`` for the loop: counts the iterations that ended, parks after ``stop``."""

    def __init__(self, stop: int) -> None:
        self.stop = stop
        self.done = 0
        self.intervals: list[float] = []
        self.reached = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.done += 1
        self.intervals.append(seconds)
        if self.done >= self.stop:
            self.reached.set()
            await asyncio.Event().wait()  # parked until the app cancels the loop


async def test_autonomous_iterations_share_a_window_owned_by_the_agent(
    tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    iterations = Iterations(stop=2)
    port = free_port()
    async with recording_memory(tmp_path, devmodel, monkeypatch) as memory:
        env = agent_env(
            devmodel,
            port,
            "auto",
            MEMORY_TYPE="remote",
            MEMORY_ENDPOINT=memory.url,
            AGENT_IDENTITY=IDENTITY,
            MEMORY_MAX_READ_SCOPE="agent",
            AUTONOMOUS_GOAL=GOAL,
            AUTONOMOUS_INTERVAL_SECONDS=7,
            AUTONOMOUS_MAX_STEPS=2,
            AUTONOMOUS_TIMEOUT_SECONDS=30,
        )
        async with serve_agent(env, deps=AgentDeps(sleep=iterations.sleep)):
            await asyncio.wait_for(iterations.reached.wait(), timeout=120)
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/metrics") as resp,
            ):
                text = await resp.text()
        async with MemoryServiceClient(memory.url, agent_identity=IDENTITY) as client:
            got = await client.recall(
                "session", GOAL, session_id="autonomous-auto", principal=IDENTITY
            )
    assert iterations.intervals == [7.0, 7.0]
    goal_requests = [
        r["messages"] for r in devmodel.requests() if r["messages"][-1]["content"] == GOAL
    ]
    assert len(goal_requests) == 2
    # The second iteration replays the first: same session, same owner.
    assert f"Echo: {GOAL}" in [m["content"] for m in goal_requests[1]]
    # The store holds the window under the agent as its own principal.
    assert GOAL in [t.content for t in got.short_term.window]
    assert 'kaos_agent_runs_total{entry="autonomous",outcome="ok"} 2.0' in text
    # Each iteration is its own request: one id per iteration, on both of its memory calls.
    recalls, writes = memory.ids("/v1/recall"), memory.ids("/v1/write")
    assert [r.split("-")[:2] for r in recalls[:2]] == [["auto", "1"], ["auto", "2"]]
    assert writes[:2] == recalls[:2]
