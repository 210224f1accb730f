"""Token accounting and budgets (``kaos_agent.usage``) on real ``kaos-agent`` processes and
the development model, which counts the tokens it served itself.

A user over the day's budget is refused 429 with ``Retry-After`` before any model call
(the model's request count does not move), over chat and over A2A (no task is made),
while another user still runs; a run that
crosses its limit (``TASK_MAX_TOKENS``, or what is left of a day budget) ends with finish
reason ``length``, over chat and over A2A (the task's ``kaos.dev/usage``); a streamed run's
usage is recorded; ``GET /v1/usage`` and ``kaos usage`` total exactly what the model
served; two agent processes on one PostgreSQL ledger count together, and a budget used up
on one is refused on the other.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import time
from collections.abc import Iterator, Mapping
from typing import Any

import aiohttp
import openai
import pytest

from tests.fixtures.agent import AgentFactory, McpFactory
from tests.fixtures.devmodel import devmodel_for
from tests.support.devmodel import DevModel
from tests.support.procs import ServiceProcess, console_script

TOOLS = '''
def forecast(city: str) -> str:
    """Weather forecast for a city."""
    return f"sunny in {city}"
'''
LOOP = {"name": "forecast", "arguments": {"city": "Loop"}}


@pytest.fixture
def devmodel(private_devmodel_server: ServiceProcess) -> Iterator[DevModel]:
    """A model only this module's agents talk to: its counts are theirs alone."""
    yield from devmodel_for(private_devmodel_server)


def served(devmodel: DevModel) -> tuple[int, int]:
    """The tokens the model says it served since the test's reset: (input, output)."""
    stats = devmodel.stats()
    return stats["input_tokens"], stats["output_tokens"]


async def chat(
    agent: ServiceProcess, text: str, principal: str = "alice"
) -> tuple[int, dict[str, Any], dict[str, str]]:
    body = {"model": "a", "messages": [{"role": "user", "content": text}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            agent.url + "/v1/chat/completions", json=body, headers={"X-Principal": principal}
        ) as resp,
    ):
        return resp.status, await resp.json(), dict(resp.headers)


async def usage(agent: ServiceProcess, query: str = "") -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(agent.url + "/v1/usage" + query) as resp:
        return resp.status, await resp.json()


def totals(items: list[dict[str, Any]]) -> tuple[int, int]:
    return sum(i["inputTokens"] for i in items), sum(i["outputTokens"] for i in items)


def send_params(text: str) -> dict[str, Any]:
    message = {
        "messageId": f"m-{time.monotonic_ns()}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    return {"message": message}


async def rpc(
    agent: ServiceProcess, method: str, params: dict[str, Any], principal: str
) -> tuple[int, dict[str, Any], Mapping[str, str]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"X-Principal": principal, "A2A-Version": "1.0"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(agent.url + "/", json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json(), resp.headers


async def send_a2a(agent: ServiceProcess, text: str, principal: str = "alice") -> dict[str, Any]:
    status, answer, _ = await rpc(agent, "SendMessage", send_params(text), principal)
    assert status == 200 and "result" in answer, answer
    task: dict[str, Any] = answer["result"]["task"]
    return task


async def test_a_user_over_the_days_budget_is_refused_before_any_model_call(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    agent = agent_factory("metered", AGENT_BUDGET_TOKENS_PER_USER_PER_DAY=1)
    # Alice's first run is admitted with one token left: it crosses it and stops, length.
    status, first, _ = await chat(agent, "hello there")
    assert status == 200
    assert first["choices"][0]["finish_reason"] == "length"
    assert first["choices"][0]["message"]["content"] == (
        "I stopped because this run reached its budget of 1 tokens before a final answer."
        " Please narrow the request or try again later."
    )
    calls = devmodel.stats()["chat"]
    assert calls == 1

    status, refused, headers = await chat(agent, "hello again")
    assert status == 429
    assert refused["error"]["code"] == "budget_exhausted"
    assert "your budget of 1 tokens a day on this agent is used up" in refused["error"]["message"]
    assert 1 <= int(headers["Retry-After"]) <= 86400
    assert devmodel.stats()["chat"] == calls  # refused before any model call

    # Bob's budget is his own.
    status, _, _ = await chat(agent, "hello", principal="bob")
    assert status == 200
    assert devmodel.stats()["chat"] == calls + 1
    status, listed = await usage(agent)
    assert status == 200
    assert {(i["user"], i["runs"]) for i in listed["items"]} == {("alice", 1), ("bob", 1)}
    assert totals(listed["items"]) == served(devmodel)


async def test_the_agents_day_budget_counts_every_user(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    agent = agent_factory("shared-budget", AGENT_BUDGET_TOKENS_PER_DAY=1)
    assert (await chat(agent, "hello", principal="alice"))[0] == 200
    status, refused, headers = await chat(agent, "hello", principal="bob")
    assert status == 429 and refused["error"]["code"] == "budget_exhausted"
    assert "this agent's budget of 1 tokens a day" in refused["error"]["message"]
    assert "Retry-After" in headers
    assert devmodel.stats()["chat"] == 1
    # Over A2A the same refusal: HTTP 429 with Retry-After, a JSON-RPC error saying why,
    # no task (nothing listed) and no model call.
    status, answer, headers = await rpc(agent, "SendMessage", send_params("hello"), "carol")
    assert status == 429 and "Retry-After" in headers, answer
    assert answer["error"]["data"]["code"] == "budget_exhausted"
    assert answer["error"]["message"].startswith("this agent's budget of 1 tokens a day is used up")
    status, listed, _ = await rpc(agent, "ListTasks", {}, "carol")
    assert status == 200 and not listed["result"].get("tasks"), listed
    assert devmodel.stats()["chat"] == 1


async def test_a_run_that_crosses_max_tokens_ends_with_length_over_chat_and_a2a(
    agent_factory: AgentFactory, mcp_server_factory: McpFactory, devmodel: DevModel
) -> None:
    tools = mcp_server_factory(TOOLS)
    agent = agent_factory(
        "capped",
        MCP_SERVERS=f"weather:{tools.url}",
        REASONING_LOOP_MAX_STEPS=50,
        TASK_MAX_TOKENS=60,
    )
    # The model calls the tool forever: the run's tokens grow with each step until the cap.
    devmodel.set_script([{"tool_call": LOOP}, {"after_tool": "*", "tool_call": LOOP}])
    status, body, _ = await chat(agent, "loop forever")
    assert status == 200
    assert body["choices"][0]["finish_reason"] == "length"
    assert "reached its budget of 60 tokens" in body["choices"][0]["message"]["content"]
    steps = devmodel.stats()["chat"]
    assert 1 < steps < 50  # stopped by the tokens, well before the step limit

    task = await send_a2a(agent, "loop forever")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "reached its budget of 60 tokens" in task["artifacts"][0]["parts"][0]["text"]
    recorded = task["metadata"]["kaos.dev/usage"]
    assert recorded["finishReason"] == "length"
    assert recorded["totalTokens"] > 60

    async with aiohttp.ClientSession() as http, http.get(agent.url + "/metrics") as resp:
        metrics = await resp.text()
    assert 'kaos_agent_runs_total{entry="chat",outcome="token_budget"} 1.0' in metrics
    assert 'kaos_agent_tokens_total{agent="capped",kind="input"}' in metrics
    # Every token the model served was counted, the step that crossed the cap's too.
    status, listed = await usage(agent)
    assert totals(listed["items"]) == served(devmodel)


async def test_streamed_usage_is_recorded_and_matches_what_the_model_served(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    agent = agent_factory("streamer")
    async with openai.AsyncOpenAI(
        base_url=agent.url + "/v1", api_key="x", default_headers={"X-Principal": "carol"}
    ) as oa:
        stream = await oa.chat.completions.create(
            model="a",
            messages=[{"role": "user", "content": "tell me a story"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        reported = None
        async for chunk in stream:
            reported = chunk.usage or reported
    assert reported is not None and reported.total_tokens > 0
    status, listed = await usage(agent, "?user=carol")
    assert status == 200
    [row] = listed["items"]
    assert (row["user"], row["runs"]) == ("carol", 1)
    assert (row["inputTokens"], row["outputTokens"]) == served(devmodel)
    assert row["totalTokens"] == reported.total_tokens


async def test_bad_usage_queries_are_400(agent_factory: AgentFactory) -> None:
    agent = agent_factory("queried")
    for query in (
        "?since=yesterday",
        "?until=2026-02-30",
        "?since=2026-02-02&until=2026-02-01",
        "?colour=blue",
        "?since=20260101",
    ):
        status, body = await usage(agent, query)
        assert status == 400, query
        assert body["error"]["code"] == "invalid_query", query


def kaos_usage(*args: str) -> str:
    done = subprocess.run(
        [console_script("kaos"), "usage", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_kaos_usage_totals_equal_the_models_own_count(
    agent_factory: AgentFactory, devmodel: DevModel, pg_dsn: str
) -> None:
    """Two processes of one Agent on one PostgreSQL ledger count together; ``kaos usage``
    over both, by user, totals what the model served; a user's budget used up on one
    replica is refused on the other."""
    store = {"TASK_STORE_TYPE": "external", "TASK_STORE_DSN": pg_dsn}
    budget = {"AGENT_BUDGET_TOKENS_PER_USER_PER_DAY": 400}
    one = agent_factory("billing", POD_NAME="billing-1", **store, **budget)
    two = agent_factory("billing", POD_NAME="billing-2", **store, **budget)
    for agent, who in ((one, "alice"), (two, "alice"), (two, "bob"), (one, "bob")):
        status, _, _ = await chat(agent, f"a question from {who}", principal=who)
        assert status == 200
    stats = devmodel.stats()
    assert stats["chat"] == 4

    # Either process answers for both.
    for agent in (one, two):
        status, listed = await usage(agent)
        assert {(i["user"], i["runs"]) for i in listed["items"]} == {("alice", 2), ("bob", 2)}
        assert totals(listed["items"]) == served(devmodel)

    by_user = json.loads(kaos_usage("--url", one.url, "--by", "user", "-o", "json"))["items"]
    assert [r["user"] for r in by_user] == ["alice", "bob"]
    assert totals(by_user) == served(devmodel)
    assert sum(r["totalTokens"] for r in by_user) == sum(served(devmodel))
    rows = list(csv.DictReader(io.StringIO(kaos_usage("--url", two.url, "-o", "csv"))))
    assert sum(int(r["totalTokens"]) for r in rows) == sum(served(devmodel))
    assert "TOTAL" in kaos_usage("--url", one.url, "--by", "day")

    # Alice spends the rest of her day on replica 1: replica 2 refuses her next run.
    devmodel.set_script([{"match": "long", "reply": " ".join(["word"] * 500)}])
    status, _, _ = await chat(one, "a long answer please", principal="alice")
    assert status == 200
    before = devmodel.stats()["chat"]
    status, refused, _ = await chat(two, "one more", principal="alice")
    assert status == 429 and refused["error"]["code"] == "budget_exhausted"
    assert devmodel.stats()["chat"] == before


@pytest.mark.parametrize("store", ["memory", "local"])
async def test_the_ledger_beside_each_task_store(
    agent_factory: AgentFactory, devmodel: DevModel, tmp_path: Any, store: str
) -> None:
    env: dict[str, object] = {"TASK_STORE_TYPE": store}
    if store == "local":
        env["TASK_STORE_PATH"] = tmp_path / "tasks.db"
    agent = agent_factory("kept", **env)
    assert (await chat(agent, "hello"))[0] == 200
    await send_a2a(agent, "hello over a2a")
    status, listed = await usage(agent)
    assert status == 200
    [row] = listed["items"]
    assert (row["agent"], row["user"], row["runs"]) == ("kept", "alice", 2)
    assert totals(listed["items"]) == served(devmodel)
