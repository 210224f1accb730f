"""Run budgets (``taskConfig``), ``GET /tools`` and the memory tool modes.

Real ``kaos-agent`` and ``kaos-mcp`` processes against the development model: a model
scripted to call a tool forever is stopped by the tool-call budget with the budget's
message and finish reason ``length`` (plain and streamed); a model that never answers is
stopped by the wall-time budget. ``GET /tools`` lists exactly the tools the model is
offered in a chat, with their schemas, and follows ``MEMORY_TOOLS``.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from tests.fixtures.agent import AgentFactory, McpFactory
from tests.support.devmodel import DevModel
from tests.support.procs import ServiceProcess, free_port

TOOLS = '''
def forecast(city: str) -> str:
    """Weather forecast for a city."""
    return f"sunny in {city}"
'''
LOOP = {"name": "forecast", "arguments": {"city": "Loop"}}


async def ask(agent: ServiceProcess, text: str) -> tuple[str, str]:
    async with openai.AsyncOpenAI(base_url=agent.url + "/v1", api_key="x") as oa:
        answer = await oa.chat.completions.create(
            model="a", messages=[{"role": "user", "content": text}]
        )
    choice = answer.choices[0]
    return choice.message.content or "", choice.finish_reason


async def get(agent: ServiceProcess, path: str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.get(agent.url + path) as resp:
        body = await resp.json() if path != "/metrics" else await resp.text()
        return resp.status, body


@pytest.fixture
def budget_agent(agent_factory: AgentFactory, mcp_server_factory: McpFactory) -> ServiceProcess:
    tools = mcp_server_factory(TOOLS)
    return agent_factory(
        "budget",
        MCP_SERVERS=f"weather:{tools.url}",
        REASONING_LOOP_MAX_STEPS=10,
        TASK_MAX_TOOL_CALLS=2,
    )


async def test_tool_call_budget_stops_the_run_with_length(
    budget_agent: ServiceProcess, devmodel: DevModel
) -> None:
    devmodel.set_script([{"tool_call": LOOP}, {"after_tool": "*", "tool_call": LOOP}])
    text, finish = await ask(budget_agent, "loop forever")
    assert finish == "length"
    assert text == (
        "I stopped because this task reached its budget of 2 tool calls before a final "
        "answer. Please narrow the request or try again."
    )
    # Two calls ran; the model's third request asked for a third, which was not made.
    assert devmodel.stats()["chat"] == 3
    _, metrics = await get(budget_agent, "/metrics")
    assert 'kaos_agent_tool_calls_total{outcome="ok",tool="forecast"} 2.0' in metrics
    assert 'kaos_agent_runs_total{entry="chat",outcome="tool_budget"} 1.0' in metrics
    # Within the budget the run ends normally.
    devmodel.set_script(
        [
            {"match": "weather", "tool_call": LOOP},
            {"after_tool": "forecast", "reply": "It is {result}"},
        ]
    )
    assert await ask(budget_agent, "weather?") == ("It is sunny in Loop", "stop")


async def test_tool_call_budget_in_a_stream_ends_with_length(
    budget_agent: ServiceProcess, devmodel: DevModel
) -> None:
    devmodel.set_script([{"tool_call": LOOP}, {"after_tool": "*", "tool_call": LOOP}])
    async with openai.AsyncOpenAI(base_url=budget_agent.url + "/v1", api_key="x") as oa:
        stream = await oa.chat.completions.create(
            model="a", messages=[{"role": "user", "content": "loop"}], stream=True
        )
        text, finish = "", None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
    assert finish == "length"
    assert "budget of 2 tool calls" in text


async def test_wall_time_budget_stops_the_run_with_length(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    agent = agent_factory("slow", TASK_MAX_WALL_SECONDS=1)
    await devmodel.aset_faults(hang=True, routes=["chat"])
    try:
        text, finish = await ask(agent, "take your time")
    finally:
        await devmodel.aset_faults()
    assert finish == "length"
    assert text.startswith("I stopped because this task reached its time budget of 1 seconds")
    _, metrics = await get(agent, "/metrics")
    assert 'kaos_agent_runs_total{entry="chat",outcome="time_budget"} 1.0' in metrics


async def test_wall_time_budget_stops_a_stream_from_a_hung_model(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    agent = agent_factory("slow-stream", TASK_MAX_WALL_SECONDS=1)
    await devmodel.aset_faults(hang=True, routes=["chat"])
    try:
        async with openai.AsyncOpenAI(base_url=agent.url + "/v1", api_key="x") as oa:
            stream = await oa.chat.completions.create(
                model="a", messages=[{"role": "user", "content": "take your time"}], stream=True
            )
            text, finish = "", None
            async for chunk in stream:
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
                    finish = chunk.choices[0].finish_reason or finish
    finally:
        await devmodel.aset_faults()
    assert finish == "length"
    assert "reached its time budget of 1 seconds" in text


async def test_wall_time_budget_spans_the_runs_model_requests(
    agent_factory: AgentFactory, mcp_server_factory: McpFactory, devmodel: DevModel
) -> None:
    """A slow model that answers every request in time still meets the run's budget: it
    is the run's wall time, not one request's."""
    tools = mcp_server_factory(TOOLS)
    agent = agent_factory(
        "slow-steps",
        MCP_SERVERS=f"weather:{tools.url}",
        REASONING_LOOP_MAX_STEPS=50,
        TASK_MAX_WALL_SECONDS=2,
    )
    devmodel.set_script([{"tool_call": LOOP}, {"after_tool": "*", "tool_call": LOOP}])
    await devmodel.aset_faults(delay=0.3, routes=["chat"])
    try:
        text, finish = await ask(agent, "loop slowly")
    finally:
        await devmodel.aset_faults()
    assert finish == "length"
    assert text.startswith("I stopped because this task reached its time budget of 2 seconds")
    assert devmodel.stats()["chat"] >= 2


async def test_get_tools_lists_what_the_model_is_offered(
    agent_factory: AgentFactory, mcp_server_factory: McpFactory, devmodel: DevModel
) -> None:
    tools = mcp_server_factory(TOOLS)
    agent = agent_factory(
        "lister",
        MCP_SERVERS=f"weather:{tools.url},gone:http://127.0.0.1:{free_port()}",
        AGENT_SUB_AGENTS=f"helper:http://127.0.0.1:{free_port()}",
        MEMORY_TYPE="remote",
        MEMORY_ENDPOINT=f"http://127.0.0.1:{free_port()}",
        MEMORY_TOOLS="read",
    )
    status, body = await get(agent, "/tools")
    assert status == 200
    listed = {t["name"]: t for t in body["tools"]}
    assert {n: t["source"] for n, t in listed.items()} == {
        "forecast": "mcp:weather",
        "delegate_to_helper": "delegation",
        "search_memory": "memory",
    }
    assert body["unavailable"] == ["mcp:gone"]
    assert listed["forecast"]["description"] == "Weather forecast for a city."
    assert listed["forecast"]["parameters"]["properties"]["city"]["type"] == "string"
    assert listed["forecast"]["parameters"]["required"] == ["city"]
    assert listed["search_memory"]["parameters"]["properties"]["level"]["enum"] == ["session"]
    assert "save_memory" not in listed  # MEMORY_TOOLS=read

    # Exactly the tools a chat offers the model.
    await ask(agent, "hello")
    assert sorted(devmodel.requests()[-1]["tools"]) == sorted(listed)


@pytest.mark.parametrize(
    ("mode", "names"),
    [
        ("all", {"search_memory", "save_memory"}),
        ("write", {"save_memory"}),
        ("none", set()),
        ("true", {"search_memory", "save_memory"}),  # the boolean of earlier versions
    ],
)
async def test_memory_tool_modes(
    agent_factory: AgentFactory, mode: str, names: set[str], devmodel: DevModel
) -> None:
    agent = agent_factory(
        f"mem-{mode}",
        MEMORY_TYPE="remote",
        MEMORY_ENDPOINT=f"http://127.0.0.1:{free_port()}",
        MEMORY_TOOLS=mode,
    )
    _, body = await get(agent, "/tools")
    assert {t["name"] for t in body["tools"]} == names
    await ask(agent, "hi")
    assert set(devmodel.requests()[-1]["tools"]) == names
