"""Autonomous mode: the goal runs on a schedule, owned by the agent itself."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from tests.fixtures.agent import AgentFactory
from tests.fixtures.memory import MakeMemory
from tests.support.devmodel import DevModel

IDENTITY = "kaos://agent/test/auto"
GOAL = "patrol the perimeter"


async def test_autonomous_iterations_share_a_window_owned_by_the_agent(
    agent_factory: AgentFactory, memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    memory = memory_factory("local")
    agent = agent_factory(
        "auto",
        MEMORY_TYPE="remote",
        MEMORY_ENDPOINT=memory.url,
        AGENT_IDENTITY=IDENTITY,
        MEMORY_MAX_READ_SCOPE="agent",
        AUTONOMOUS_GOAL=GOAL,
        AUTONOMOUS_INTERVAL_SECONDS=0.2,
        AUTONOMOUS_MAX_STEPS=2,
        AUTONOMOUS_TIMEOUT_SECONDS=30,
    )
    deadline = time.monotonic() + 60
    goal_requests: list[list[dict[str, str]]] = []
    while time.monotonic() < deadline:
        goal_requests = [
            r["messages"] for r in devmodel.requests() if r["messages"][-1]["content"] == GOAL
        ]
        if len(goal_requests) >= 2:
            break
        await asyncio.sleep(0.2)  # polling interval of a deadline wait
    assert len(goal_requests) >= 2, "the loop did not run twice"
    # The second iteration replays the first: same session, same owner.
    assert f"Echo: {GOAL}" in [m["content"] for m in goal_requests[1]]
    # The store holds the window under the agent as its own principal.
    async with memory.client(agent=IDENTITY) as client:
        got = await client.recall("session", GOAL, session_id="autonomous-auto", principal=IDENTITY)
    assert GOAL in [t.content for t in got.short_term.window]
    async with aiohttp.ClientSession() as http, http.get(agent.url + "/metrics") as resp:
        text = await resp.text()
    assert 'kaos_agent_runs_total{entry="autonomous",outcome="ok"}' in text
