"""A run that outlives its pod: two ``kaos-agent`` processes share a PostgreSQL task store;
the one running a task is killed (SIGKILL) or stopped (SIGTERM: its grace period ends while
the call still runs, and it hands the task over) in the middle of a tool call, and the
other resumes the run from its checkpoint. A real MCP tool server counts every call it
receives: a call that finished before the kill is not made again, and the one in flight
is reported to the model as interrupted, not made again either. The memory service (in
the test's loop) sees the run's one recall and its one write: a resume repeats neither."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest
from kaos_agent.a2a.checkpoint import INTERRUPTED

from tests.fixtures.agent import AgentFactory, McpFactory, recording_memory
from tests.integration.agent.test_a2a_replicas import get_task, send, store_env, until
from tests.support.devmodel import DevModel

# ``block`` holds its call until the test creates the release file: the kill lands while
# it runs, whatever the machine's speed.
TOOLS = '''
import asyncio
import pathlib

_CALLS = pathlib.Path({calls!r})
_RELEASE = pathlib.Path({release!r})


def _record(line: str) -> None:
    with _CALLS.open("a") as out:
        out.write(line + "\\n")


async def count(label: str) -> str:
    """Counts a call."""
    _record("count " + label)
    return "counted " + label


async def block(label: str) -> str:
    """Waits until the test releases it."""
    _record("block " + label)
    while not _RELEASE.exists():
        await asyncio.sleep(0.05)
    return "released " + label
'''


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "sigterm"])
async def test_a_stopped_replicas_run_resumes_elsewhere_without_repeating_a_tool_call(
    stop: signal.Signals,
    agent_factory: AgentFactory,
    mcp_server_factory: McpFactory,
    devmodel: DevModel,
    pg_dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with recording_memory(tmp_path, devmodel, monkeypatch) as memory:
        await resume_after_a_stop(
            stop, agent_factory, mcp_server_factory, devmodel, pg_dsn, tmp_path, memory.url
        )
    assert len(memory.ids("/v1/recall")) == 1, memory.seen
    assert len(memory.ids("/v1/write")) == 1, memory.seen


async def resume_after_a_stop(
    stop: signal.Signals,
    agent_factory: AgentFactory,
    mcp_server_factory: McpFactory,
    devmodel: DevModel,
    pg_dsn: str,
    tmp_path: Path,
    memory_url: str,
) -> None:
    calls, release = tmp_path / "calls.log", tmp_path / "release"
    calls.touch()
    tools = mcp_server_factory(TOOLS.format(calls=str(calls), release=str(release)))
    env = {
        "MCP_SERVERS": f"counter:{tools.url}",
        "REASONING_LOOP_MAX_STEPS": 5,
        "MEMORY_TYPE": "remote",
        "MEMORY_ENDPOINT": memory_url,
    }
    grace = {"AGENT_SHUTDOWN_GRACE_SECONDS": 1}
    one = agent_factory("resumable", **store_env(pg_dsn, "replica-1", **env, **grace))
    two = agent_factory("resumable", **store_env(pg_dsn, "replica-2", **env))
    devmodel.set_script(
        [
            {"match": "resume me", "tool_call": {"name": "count", "arguments": {"label": "a"}}},
            {"after_tool": "count", "tool_call": {"name": "block", "arguments": {"label": "b"}}},
            {"after_tool": "block", "reply": "finished after: {result}"},
        ]
    )

    task = await send(one.url, "resume me", wait=False)

    async def blocked() -> bool:
        return "block b" in calls.read_text()

    await until(blocked, "replica 1 to be inside the blocking tool call")
    # SIGTERM: the grace period ends with the call still blocked; the task is handed over.
    assert await asyncio.to_thread(one.stop, stop) == (0 if stop == signal.SIGTERM else -stop)

    async def completed() -> dict[str, Any] | None:
        got = await get_task(two.url, task["id"])
        return got if got["status"]["state"] == "TASK_STATE_COMPLETED" else None

    ended = await until(completed, "replica 2 to resume and finish the task")
    answer = ended["artifacts"][0]["parts"][0]["text"]
    assert answer == f"finished after: {INTERRUPTED}"
    release.touch()  # the killed replica's call ends; nothing waits for it
    assert calls.read_text().splitlines() == ["count a", "block b"]
    # The resumed run sent the model the finished call's result and the interrupted one.
    last = (await devmodel.arequests())[-1]
    tool_results = [m.get("content") for m in last["messages"] if m.get("role") == "tool"]
    assert tool_results == ["counted a", INTERRUPTED]
    # The task's own history holds the message and the one answer: nothing repeated.
    assert [m["role"] for m in ended["history"]] == ["ROLE_USER", "ROLE_AGENT"]
