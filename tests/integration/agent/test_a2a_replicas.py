"""Replicas of one Agent sharing a PostgreSQL task store, as real ``kaos-agent`` processes:
any replica answers for any task, a cancel reaches the replica running it, a finished
task outlives a restart, a dead replica's task is failed, and the autonomous goal runs
once per interval however many replicas there are. And one agent in the test's loop,
stopped while a task runs: it drains before it closes."""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
from kaos_agent.a2a.runs import STOPPED
from kaos_agent.a2a.tasks import LAPSED_LEASE

from tests.fixtures.agent import AgentFactory, agent_env, serve_agent
from tests.support.devmodel import DevModel
from tests.support.procs import ServiceProcess, free_port

DEADLINE = 30.0


def store_env(dsn: str, pod: str, **extra: object) -> dict[str, object]:
    return {
        "TASK_STORE_TYPE": "external",
        "TASK_STORE_DSN": dsn,
        "POD_NAME": pod,
        "TASK_LEASE_SECONDS": 3,
        **extra,
    }


async def rpc(
    url: str, method: str, params: dict[str, Any], *, principal: str = "alice"
) -> tuple[int, dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"X-Principal": principal, "A2A-Version": "1.0"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(url + "/", json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json()


async def send(url: str, text: str, *, wait: bool) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {
            "messageId": f"m-{time.monotonic_ns()}",
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        },
        "configuration": {"returnImmediately": not wait},
    }
    status, answer = await rpc(url, "SendMessage", params)
    assert status == 200 and "result" in answer, answer
    task: dict[str, Any] = answer["result"]["task"]
    return task


async def get_task(url: str, task_id: str) -> dict[str, Any]:
    status, answer = await rpc(url, "GetTask", {"id": task_id})
    assert status == 200 and "result" in answer, answer
    task: dict[str, Any] = answer["result"]
    return task


async def until(condition: Any, what: str, within: float = DEADLINE) -> Any:
    """Poll ``await condition()`` until it is truthy; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = await condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.1)


async def working_gauge(agent: ServiceProcess) -> float:
    async with aiohttp.ClientSession() as http, http.get(agent.url + "/metrics") as resp:
        text = await resp.text()
    for line in text.splitlines():
        if line.startswith("kaos_agent_a2a_tasks_working "):
            return float(line.split()[1])
    raise AssertionError("no kaos_agent_a2a_tasks_working gauge")


async def test_any_replica_answers_and_cancels_a_task_running_on_another(
    agent_factory: AgentFactory, devmodel: DevModel, pg_dsn: str
) -> None:
    one = agent_factory("shared", **store_env(pg_dsn, "replica-1"))
    two = agent_factory("shared", **store_env(pg_dsn, "replica-2"))
    devmodel.set_faults(hang=True, routes=["chat"])

    task = await send(one.url, "take your time", wait=False)
    assert task["status"]["state"] == "TASK_STATE_WORKING"
    assert (await get_task(two.url, task["id"]))["status"]["state"] == "TASK_STATE_WORKING"
    status, listed = await rpc(two.url, "ListTasks", {})
    assert status == 200 and [t["id"] for t in listed["result"]["tasks"]] == [task["id"]]
    status, hidden = await rpc(two.url, "GetTask", {"id": task["id"]}, principal="mallory")
    assert hidden["error"]["code"] == -32001
    await until(lambda: working_gauge(one), "replica 1 to run the task")

    status, answer = await rpc(two.url, "CancelTask", {"id": task["id"]})
    assert status == 200 and answer["result"]["status"]["state"] == "TASK_STATE_CANCELED"

    async def stopped() -> bool:
        return await working_gauge(one) == 0

    await until(stopped, "replica 1 to stop the canceled run")
    assert (await get_task(one.url, task["id"]))["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_finished_task_outlives_a_restart(
    agent_factory: AgentFactory, devmodel: DevModel, pg_dsn: str
) -> None:
    one = agent_factory("shared", **store_env(pg_dsn, "replica-1"))
    task = await send(one.url, "remember me", wait=True)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert one.stop() == 0

    again = agent_factory("shared", port=one.port, **store_env(pg_dsn, "replica-1"))
    kept = await get_task(again.url, task["id"])
    assert kept["status"]["state"] == "TASK_STATE_COMPLETED"
    assert kept["artifacts"][0]["parts"][0]["text"] == "Echo: remember me"


async def test_the_task_of_a_dead_replica_is_failed_by_another(
    agent_factory: AgentFactory, devmodel: DevModel, pg_dsn: str
) -> None:
    one = agent_factory("shared", **store_env(pg_dsn, "replica-1"))
    two = agent_factory("shared", **store_env(pg_dsn, "replica-2"))
    devmodel.set_faults(hang=True, routes=["chat"])
    task = await send(one.url, "never finished", wait=False)
    one.stop(signal.SIGKILL)

    async def failed() -> dict[str, Any] | None:
        got = await get_task(two.url, task["id"])
        return got if got["status"]["state"] == "TASK_STATE_FAILED" else None

    ended = await until(failed, "replica 2 to fail the orphaned task")
    assert ended["status"]["message"]["parts"][0]["text"] == LAPSED_LEASE


async def test_the_autonomous_goal_runs_once_per_interval_with_two_replicas(
    agent_factory: AgentFactory, devmodel: DevModel, pg_dsn: str
) -> None:
    interval, goal = 2.0, "count the sheep"
    auto = {"AUTONOMOUS_GOAL": goal, "AUTONOMOUS_INTERVAL_SECONDS": interval}
    agent_factory("auto", **store_env(pg_dsn, "replica-1", **auto))
    agent_factory("auto", **store_env(pg_dsn, "replica-2", **auto))

    async def goal_requests() -> list[float]:
        runs = [
            r["received_at"]
            for r in await devmodel.arequests()
            if any(goal in str(m.get("content")) for m in r.get("messages", []))
        ]
        return sorted(runs) if len(runs) >= 4 else []

    times = await until(goal_requests, "four autonomous iterations", within=60)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Two replicas running every iteration would ask twice at (nearly) the same time.
    assert min(gaps) >= interval * 0.9, gaps


async def test_a_stopping_agent_refuses_new_work_then_fails_what_still_runs(
    devmodel: DevModel, tmp_path: Path
) -> None:
    port = free_port()
    env = agent_env(
        devmodel,
        port,
        "draining",
        TASK_STORE_TYPE="local",
        TASK_STORE_PATH=tmp_path / "tasks.db",
        AGENT_SHUTDOWN_GRACE_SECONDS=2,
    )
    devmodel.set_faults(hang=True, routes=["chat"])
    async with serve_agent(env) as server, aiohttp.ClientSession() as http:
        url = f"http://127.0.0.1:{port}"
        task = await send(url, "still going", wait=False)
        shutdown = asyncio.create_task(server.app.shutdown())

        async def unready() -> bool:
            async with http.get(url + "/readyz") as resp:
                return resp.status == 503

        await until(unready, "readiness to answer 503")
        status, refused = await rpc(
            url, "SendMessage", {"message": {"role": "ROLE_USER", "parts": [{"text": "more"}]}}
        )
        assert status == 503 and refused["error"]["data"]["code"] == "shutting_down"
        chat = {"model": "draining", "messages": [{"role": "user", "content": "hi"}]}
        async with http.post(url + "/v1/chat/completions", json=chat) as resp:
            assert resp.status == 503
            assert "shutting down" in (await resp.text())
        await asyncio.wait_for(shutdown, DEADLINE)
        ended = await get_task(url, task["id"])
        assert ended["status"]["state"] == "TASK_STATE_FAILED"
        assert ended["status"]["message"]["parts"][0]["text"] == STOPPED


async def test_sigterm_drains_while_listening_and_another_replica_reads_the_outcome(
    agent_factory: AgentFactory, devmodel: DevModel, pg_dsn: str
) -> None:
    one = agent_factory("shared", **store_env(pg_dsn, "replica-1", AGENT_SHUTDOWN_GRACE_SECONDS=5))
    two = agent_factory("shared", **store_env(pg_dsn, "replica-2"))
    devmodel.set_faults(hang=True, routes=["chat"])
    task = await send(one.url, "cut short", wait=False)
    await until(lambda: working_gauge(one), "replica 1 to run the task")

    one.proc.send_signal(signal.SIGTERM)
    async with aiohttp.ClientSession() as http:

        async def unready() -> bool:
            async with http.get(one.url + "/readyz") as resp:
                return resp.status == 503

        await until(unready, "replica 1's readiness to answer 503 while it drains")
    status, refused = await rpc(
        one.url, "SendMessage", {"message": {"role": "ROLE_USER", "parts": [{"text": "more"}]}}
    )
    assert status == 503 and refused["error"]["data"]["code"] == "shutting_down"
    assert await asyncio.to_thread(one.proc.wait, DEADLINE) == 0

    ended = await get_task(two.url, task["id"])
    assert ended["status"]["state"] == "TASK_STATE_FAILED"
    assert ended["status"]["message"]["parts"][0]["text"] == STOPPED
