"""Replicas of one Agent sharing a PostgreSQL task store, as real ``kaos-agent`` processes:
any replica answers for any task, a cancel reaches the replica running it, a finished
task outlives a restart, a dead replica's task runs again on another (from its message:
``test_a2a_resume`` has the checkpointed steps), and the autonomous goal runs
once per interval however many replicas there are, and a replica stopped by SIGTERM
hands its running task over to another; every replica reports the whole Agent's load (what
the autoscaler reads). And one agent in the test's loop (a store no other
replica shares), stopped while a task runs: it drains, then fails it, before it closes."""

from __future__ import annotations

import asyncio
import itertools
import signal
import time
from pathlib import Path
from typing import Any

import aiohttp
from kaos_agent.a2a.runs import STOPPED

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


async def test_the_task_of_a_dead_replica_restarts_from_its_message_on_another(
    agent_factory: AgentFactory, devmodel: DevModel, pg_dsn: str
) -> None:
    one = agent_factory("shared", **store_env(pg_dsn, "replica-1"))
    two = agent_factory("shared", **store_env(pg_dsn, "replica-2"))
    devmodel.set_faults(hang=True, routes=["chat"])
    task = await send(one.url, "never finished", wait=False)
    await until(lambda: working_gauge(one), "replica 1 to run the task")
    one.stop(signal.SIGKILL)
    devmodel.set_faults()  # the model answers again: no step of the run was checkpointed

    async def finished() -> dict[str, Any] | None:
        got = await get_task(two.url, task["id"])
        return got if got["status"]["state"] == "TASK_STATE_COMPLETED" else None

    ended = await until(finished, "replica 2 to run the orphaned task again")
    assert ended["artifacts"][0]["parts"][0]["text"] == "Echo: never finished"
    assert [m["role"] for m in ended["history"]] == ["ROLE_USER", "ROLE_AGENT"]


async def test_the_autonomous_goal_runs_once_per_interval_with_three_replicas(
    agent_factory: AgentFactory, devmodel: DevModel, pg_dsn: str
) -> None:
    interval, goal = 2.0, "count the sheep"
    auto = {"AUTONOMOUS_GOAL": goal, "AUTONOMOUS_INTERVAL_SECONDS": interval}
    for replica in ("replica-1", "replica-2", "replica-3"):
        agent_factory("auto", **store_env(pg_dsn, replica, **auto))

    async def goal_requests() -> list[float]:
        runs = [
            r["received_at"]
            for r in await devmodel.arequests()
            if any(goal in str(m.get("content")) for m in r.get("messages", []))
        ]
        return sorted(runs) if len(runs) >= 4 else []

    times = await until(goal_requests, "four autonomous iterations", within=60)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Replicas each running every iteration would ask at (nearly) the same time.
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


async def test_sigterm_drains_while_listening_then_hands_the_task_to_another_replica(
    agent_factory: AgentFactory, devmodel: DevModel, pg_dsn: str
) -> None:
    one = agent_factory("shared", **store_env(pg_dsn, "replica-1", AGENT_SHUTDOWN_GRACE_SECONDS=2))
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

    # Not failed: handed over, and replica 2 (whose model call hangs too) now runs it.
    await until(lambda: working_gauge(two), "replica 2 to claim the handed-over task")
    assert (await get_task(two.url, task["id"]))["status"]["state"] == "TASK_STATE_WORKING"
    devmodel.set_faults()

    async def ended() -> dict[str, Any] | None:
        got = await get_task(two.url, task["id"])
        return got if got["status"]["state"] != "TASK_STATE_WORKING" else None

    done = await until(ended, "replica 2 to finish the task")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done


async def load(agent: ServiceProcess) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http, http.get(agent.url + "/load") as resp:
        assert resp.status == 200
        answer: dict[str, Any] = await resp.json()
        return answer


async def test_every_replica_reports_the_whole_agents_load(
    agent_factory: AgentFactory, devmodel: DevModel, pg_dsn: str
) -> None:
    """What KEDA reads through the Service: the same Agent-wide count whichever replica
    answers, though only one runs the tasks."""
    one = agent_factory("shared", **store_env(pg_dsn, "replica-1"))
    two = agent_factory("shared", **store_env(pg_dsn, "replica-2"))
    assert await load(two) == {
        "load": 0,
        "tasks": 0,
        "runs": 0,
        "scope": "agent",
        "degraded": False,
    }
    devmodel.set_faults(hang=True, routes=["chat"])
    tasks = [await send(one.url, f"take your time {i}", wait=False) for i in range(3)]

    async def all_three() -> bool:
        return await working_gauge(one) == 3

    await until(all_three, "replica 1 to run the three tasks")
    for replica in (one, two):
        assert await load(replica) == {
            "load": 3,
            "tasks": 3,
            "runs": 0,
            "scope": "agent",
            "degraded": False,
        }
    await rpc(two.url, "CancelTask", {"id": tasks[0]["id"]})

    async def two_left() -> bool:
        return (await load(two))["tasks"] == 2

    await until(two_left, "the canceled task to leave the load")
