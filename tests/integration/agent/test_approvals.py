"""Approval gates on real parts: ``kaos-agent`` processes on loopback, the devmodel scripting
the tool calls, a real MCP tool server that writes every call it receives to a file (the
tool's own counter), and, for the shared store, real PostgreSQL.

A gated call pauses its A2A task in input-required with the call in the task and runs
nothing; the run's own user approves and it runs once, then the run finishes; another user
is refused (403) and nothing changes; a denial and a timeout each end the run with the
call never made; the paused task outlives its process (SIGKILL), decided on another process
sharing the store; over chat completions the answer names the A2A task to decide.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from tests.fixtures.agent import AgentFactory, McpFactory
from tests.integration.agent.test_a2a_replicas import get_task, rpc, store_env, until
from tests.support.devmodel import DevModel
from tests.support.procs import REPO_ROOT, ServiceProcess, console_script

TOOLS = '''
import pathlib

_CALLS = pathlib.Path({calls!r})


def _record(line: str) -> None:
    with _CALLS.open("a") as out:
        out.write(line + "\\n")


def quote(amount: int) -> str:
    """The price of a charge (not gated)."""
    _record(f"quote {{amount}}")
    return f"quote for {{amount}}"


def charge(amount: int) -> str:
    """Charges the card (gated)."""
    _record(f"charge {{amount}}")
    return f"charged {{amount}}"
'''

SCRIPT = [
    {"match": "pay", "tool_call": {"name": "quote", "arguments": {"amount": 5}}},
    {"after_tool": "quote", "tool_call": {"name": "charge", "arguments": {"amount": 5}}},
    {"after_tool": "charge", "reply": "done: {result}"},
]
GATES = {"rules": [{"mcpServer": "payments", "tools": ["charge"]}], "timeoutSeconds": 600}
PAUSED, COMPLETED = "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"
KAOS = console_script("kaos")


class Calls:
    """The tool server's own record of the calls it received."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    def __call__(self) -> list[str]:
        return self.path.read_text().splitlines()


@pytest.fixture
def calls(tmp_path: Path) -> Calls:
    return Calls(tmp_path / "calls.log")


@pytest.fixture
def payments(mcp_server_factory: McpFactory, calls: Calls) -> ServiceProcess:
    return mcp_server_factory(TOOLS.format(calls=str(calls.path)), name="payments")


def gated_env(payments: ServiceProcess, gates: dict[str, Any] = GATES) -> dict[str, object]:
    return {
        "MCP_SERVERS": f"payments:{payments.url}",
        "REASONING_LOOP_MAX_STEPS": 5,
        "AGENT_APPROVALS": json.dumps(gates),
        "TASK_LEASE_SECONDS": 3,
    }


def message(text: str | None = None, **data: object) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if text is not None:
        parts.append({"text": text})
    if data:
        parts.append({"data": data})
    return {"messageId": f"m-{time.monotonic_ns()}", "role": "ROLE_USER", "parts": parts}


async def send(url: str, text: str, principal: str = "alice") -> dict[str, Any]:
    status, answer = await rpc(url, "SendMessage", {"message": message(text)}, principal=principal)
    assert status == 200 and "result" in answer, answer
    task: dict[str, Any] = answer["result"]["task"]
    return task


async def decide(
    url: str, task_id: str, principal: str, **decision: object
) -> tuple[int, dict[str, Any]]:
    msg = message(**decision) | {"taskId": task_id}
    return await rpc(url, "SendMessage", {"message": msg}, principal=principal)


def pending_of(task: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = task["metadata"]["kaos.dev/approval"]
    return found


def answer_of(task: dict[str, Any]) -> str:
    return str(task["artifacts"][0]["parts"][0]["text"])


async def paused_payment(
    agent_factory: AgentFactory, payments: ServiceProcess, devmodel: DevModel
) -> tuple[ServiceProcess, dict[str, Any]]:
    """A gated agent, and alice's task paused on its call of ``charge``."""
    agent = agent_factory("payer", **gated_env(payments))
    devmodel.set_script(SCRIPT)
    task = await send(agent.url, "pay the invoice")
    assert task["status"]["state"] == PAUSED
    return agent, task


async def test_a_gated_call_waits_for_its_users_approval_then_runs_once(
    agent_factory: AgentFactory, payments: ServiceProcess, calls: Calls, devmodel: DevModel
) -> None:
    agent, task = await paused_payment(agent_factory, payments, devmodel)
    pending = pending_of(task)
    assert pending["state"] == "pending"
    [call] = pending["calls"]
    assert (call["tool"], call["arguments"]) == ("charge", {"amount": 5})
    assert call["toolCallId"] and pending["deadline"].endswith("Z")
    status_parts = task["status"]["message"]["parts"]
    assert "charge" in status_parts[0]["text"] and task["id"] in status_parts[0]["text"]
    assert status_parts[1]["data"]["approval"]["calls"] == pending["calls"]
    # The ungated call ran; the gated one did not.
    assert calls() == ["quote 5"]

    # Bob is not the run's user: refused with 403, nothing changes.
    status, refused = await decide(agent.url, task["id"], "bob", decision="approve")
    assert status == 403 and refused["error"]["data"]["code"] == "approval_not_granted"
    # A decision that is neither approve nor deny: a clear error, nothing changes.
    status, bad = await decide(agent.url, task["id"], "alice", decision="maybe")
    assert status == 200 and bad["error"]["code"] == -32602
    assert '"approve" or "deny"' in bad["error"]["message"]
    assert (await get_task(agent.url, task["id"]))["status"]["state"] == PAUSED
    assert calls() == ["quote 5"]

    status, approved = await decide(agent.url, task["id"], "alice", decision="approve")
    assert status == 200, approved
    done = approved["result"]["task"]
    assert done["status"]["state"] == COMPLETED
    assert answer_of(done) == "done: charged 5"
    assert calls() == ["quote 5", "charge 5"]
    record = pending_of(done)
    assert (record["state"], record["decidedBy"]) == ("approved", "alice")
    # The decision joined the history; a second one finds nothing to decide.
    assert [m["role"] for m in done["history"]] == ["ROLE_USER", "ROLE_USER", "ROLE_AGENT"]
    status, again = await decide(agent.url, task["id"], "alice", decision="approve")
    assert "error" in again and "waits for no decision" in again["error"]["message"]
    assert calls() == ["quote 5", "charge 5"]
    # The decision is in the audit trail, with who took it.
    async with (
        aiohttp.ClientSession() as http,
        http.get(agent.url + "/v1/audit", params={"task": task["id"]}) as resp,
    ):
        assert resp.status == 200
        items = (await resp.json())["items"]
    decisions = [
        (i["name"], i["outcome"], i["decidedBy"]) for i in items if i["kind"] == "approval"
    ]
    assert decisions == [("charge", "approved", "alice")]


async def test_a_denial_ends_the_run_without_the_call(
    agent_factory: AgentFactory, payments: ServiceProcess, calls: Calls, devmodel: DevModel
) -> None:
    agent, task = await paused_payment(agent_factory, payments, devmodel)

    status, denied = await decide(
        agent.url, task["id"], "alice", decision="deny", reason="wrong card"
    )
    assert status == 200, denied
    done = denied["result"]["task"]
    assert done["status"]["state"] == COMPLETED
    assert "denied by a human reviewer" in answer_of(done)
    assert "wrong card" in answer_of(done)
    assert (pending_of(done)["state"], pending_of(done)["reason"]) == ("denied", "wrong card")
    assert calls() == ["quote 5"]


async def test_a_timeout_decides_per_on_timeout_without_the_call(
    agent_factory: AgentFactory, payments: ServiceProcess, calls: Calls, devmodel: DevModel
) -> None:
    gates = {**GATES, "timeoutSeconds": 1, "onTimeout": "deny"}
    agent = agent_factory("payer", **gated_env(payments, gates))
    devmodel.set_script(SCRIPT)
    task = await send(agent.url, "pay the invoice")
    assert task["status"]["state"] == PAUSED

    async def ended() -> dict[str, Any] | None:
        got = await get_task(agent.url, task["id"])
        return got if got["status"]["state"] == COMPLETED else None

    done = await until(ended, "the timeout to decide the paused task")
    assert "nobody approved it in time" in answer_of(done)
    assert (pending_of(done)["state"], pending_of(done)["decidedBy"]) == ("timeout", "timeout")
    assert calls() == ["quote 5"]


async def test_over_chat_completions_the_answer_names_the_task_to_decide(
    agent_factory: AgentFactory, payments: ServiceProcess, calls: Calls, devmodel: DevModel
) -> None:
    agent = agent_factory("payer", **gated_env(payments))
    devmodel.set_script(SCRIPT)
    async with openai.AsyncOpenAI(
        base_url=agent.url + "/v1", api_key="x", default_headers={"X-Principal": "alice"}
    ) as oa:
        answer = await oa.chat.completions.create(
            model="a", messages=[{"role": "user", "content": "pay the invoice"}]
        )
    text = answer.choices[0].message.content or ""
    assert "waits for a human's approval" in text and "charge" in text
    match = re.search(r"A2A task ([0-9a-f]{32})", text)
    assert match is not None, text
    task_id = match.group(1)
    assert calls() == ["quote 5"]
    assert (await get_task(agent.url, task_id))["status"]["state"] == PAUSED

    status, approved = await decide(agent.url, task_id, "alice", decision="approve")
    assert status == 200, approved
    assert answer_of(approved["result"]["task"]) == "done: charged 5"
    assert calls() == ["quote 5", "charge 5"]


async def test_a_streamed_chat_answer_ends_naming_the_task(
    agent_factory: AgentFactory, payments: ServiceProcess, calls: Calls, devmodel: DevModel
) -> None:
    agent = agent_factory("payer", **gated_env(payments))
    devmodel.set_script(SCRIPT)
    body = {"model": "a", "stream": True, "messages": [{"role": "user", "content": "pay"}]}
    text = ""
    async with (
        aiohttp.ClientSession() as http,
        http.post(agent.url + "/v1/chat/completions", json=body) as resp,
    ):
        assert resp.status == 200
        async for raw in resp.content:
            line = raw.decode().strip()
            if line.startswith("data: {"):
                for choice in json.loads(line[6:]).get("choices", []):
                    text += choice.get("delta", {}).get("content") or ""
    assert "waits for a human's approval" in text
    assert re.search(r"A2A task [0-9a-f]{32}", text), text
    assert calls() == ["quote 5"]


async def test_a_paused_task_outlives_its_process_and_is_decided_on_another(
    agent_factory: AgentFactory,
    payments: ServiceProcess,
    calls: Calls,
    devmodel: DevModel,
    pg_dsn: str,
) -> None:
    env = gated_env(payments)
    one = agent_factory("payer", **store_env(pg_dsn, "replica-1", **env))
    two = agent_factory("payer", **store_env(pg_dsn, "replica-2", **env))
    devmodel.set_script(SCRIPT)

    task = await send(one.url, "pay the invoice")
    assert task["status"]["state"] == PAUSED
    await asyncio.to_thread(one.stop, signal.SIGKILL)
    assert (await get_task(two.url, task["id"]))["status"]["state"] == PAUSED
    assert calls() == ["quote 5"]

    status, refused = await decide(two.url, task["id"], "bob", decision="approve")
    assert status == 403 and refused["error"]["data"]["code"] == "approval_not_granted"
    assert calls() == ["quote 5"]
    status, approved = await decide(two.url, task["id"], "alice", decision="approve")
    assert status == 200, approved
    done = approved["result"]["task"]
    assert done["status"]["state"] == COMPLETED
    assert answer_of(done) == "done: charged 5"
    assert calls() == ["quote 5", "charge 5"]


def kaos(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [KAOS, *args], capture_output=True, text=True, timeout=120, check=False, cwd=REPO_ROOT
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


async def test_the_cli_lists_the_paused_runs_and_decides_them(
    agent_factory: AgentFactory, payments: ServiceProcess, calls: Calls, devmodel: DevModel
) -> None:
    agent, task = await paused_payment(agent_factory, payments, devmodel)
    where = ["--url", agent.url]

    listed = await asyncio.to_thread(
        kaos, "agent", "approvals", "payer", *where, "--principal", "alice", "-o", "json"
    )
    assert listed.returncode == 0, listed.stderr
    [item] = json.loads(listed.stdout)["items"]
    assert (item["task"], item["principal"]) == (task["id"], "alice")
    assert [(c["tool"], c["arguments"]) for c in item["calls"]] == [("charge", {"amount": 5})]
    table = await asyncio.to_thread(kaos, "agent", "approvals", "payer", *where)
    assert table.returncode == 0 and "no runs wait for approval" in table.stdout  # anonymous

    refused = await asyncio.to_thread(
        kaos, "agent", "approve", "payer", task["id"], *where, "--principal", "bob"
    )
    assert refused.returncode != 0 and "403" in refused.stderr, refused.stderr
    assert (await get_task(agent.url, task["id"]))["status"]["state"] == PAUSED

    denied = await asyncio.to_thread(
        kaos, "agent", "deny", "payer", task["id"], *where, "--principal", "alice",
        "--reason", "not today",
    )  # fmt: skip
    assert denied.returncode == 0, denied.stderr
    assert task["id"] in denied.stdout and "denied" in denied.stdout

    async def ended() -> dict[str, Any] | None:
        got = await get_task(agent.url, task["id"])
        return got if got["status"]["state"] == COMPLETED else None

    done = await until(ended, "the denied run to end")
    assert "not today" in answer_of(done)
    assert calls() == ["quote 5"]
