"""The reasoning loop with MCP tools: scripted tool calls, tool failures, the step limit."""

from __future__ import annotations

import aiohttp
import openai
import pytest
from kaos_agent.app import AgentDeps
from pydantic_ai.toolsets import FunctionToolset

from tests.fixtures.agent import AgentFactory, McpFactory, agent_env, serve_agent
from tests.support.devmodel import DevModel
from tests.support.procs import ServiceProcess, free_port

TOOLS = '''
def forecast(city: str) -> str:
    """Weather forecast for a city."""
    return f"sunny in {city}"

def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"exploded: {reason}")
'''


@pytest.fixture
def tools_agent(agent_factory: AgentFactory, mcp_server_factory: McpFactory) -> ServiceProcess:
    tools = mcp_server_factory(TOOLS)
    return agent_factory("tools", MCP_SERVERS=f"weather:{tools.url}", REASONING_LOOP_MAX_STEPS=3)


async def ask(agent: ServiceProcess, text: str) -> tuple[str, str]:
    async with openai.AsyncOpenAI(base_url=agent.url + "/v1", api_key="x") as oa:
        answer = await oa.chat.completions.create(
            model="a", messages=[{"role": "user", "content": text}]
        )
    choice = answer.choices[0]
    return choice.message.content or "", choice.finish_reason


async def metrics(agent: ServiceProcess) -> str:
    async with aiohttp.ClientSession() as http, http.get(agent.url + "/metrics") as resp:
        return await resp.text()


async def test_scripted_tool_call_runs_the_mcp_tool(
    tools_agent: ServiceProcess, devmodel: DevModel
) -> None:
    devmodel.set_script(
        [
            {"match": "weather", "tool_call": {"name": "forecast", "arguments": {"city": "Oslo"}}},
            {"after_tool": "forecast", "reply": "The forecast says: {result}"},
        ]
    )
    text, finish = await ask(tools_agent, "what is the weather in Oslo?")
    assert text == "The forecast says: sunny in Oslo"
    assert finish == "stop"
    assert 'kaos_agent_tool_calls_total{outcome="ok",tool="forecast"} 1.0' in await metrics(
        tools_agent
    )


async def test_inline_directive_tool_call(tools_agent: ServiceProcess) -> None:
    text, _ = await ask(tools_agent, 'go [[call forecast {"city": "Rome"}]]')
    assert text == "Tool forecast returned: sunny in Rome"


async def test_tool_error_goes_back_to_the_model(
    tools_agent: ServiceProcess, devmodel: DevModel
) -> None:
    devmodel.set_script(
        [
            {"match": "boom", "tool_call": {"name": "explode", "arguments": {"reason": "test"}}},
            {"after_tool": "explode", "reply": "Recovered from: {result}"},
        ]
    )
    text, finish = await ask(tools_agent, "boom please")
    assert finish == "stop"
    assert text.startswith("Recovered from:") and "exploded: test" in text


async def test_step_limit_stops_a_model_that_never_stops(
    tools_agent: ServiceProcess, devmodel: DevModel
) -> None:
    call = {"name": "forecast", "arguments": {"city": "Loop"}}
    devmodel.set_script([{"tool_call": call}, {"after_tool": "*", "tool_call": call}])
    text, finish = await ask(tools_agent, "loop forever")
    assert finish == "length"
    assert "limit of 3 reasoning steps" in text
    assert devmodel.stats()["chat"] == 3
    assert 'kaos_agent_runs_total{entry="chat",outcome="step_limit"} 1.0' in await metrics(
        tools_agent
    )
    # The server is fine afterwards.
    devmodel.set_script([])
    assert (await ask(tools_agent, "still there?"))[0] == "Echo: still there?"


async def test_unreachable_mcp_server_degrades_not_fails(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    agent = agent_factory("lonely", MCP_SERVERS=f"gone:http://127.0.0.1:{free_port()}")
    text, finish = await ask(agent, "anyone?")
    assert (text, finish) == ("Echo: anyone?", "stop")
    # The model was offered no tools from the dead server.
    assert not devmodel.requests()[-1].get("tools")


async def test_step_limit_in_a_stream_ends_with_length(
    tools_agent: ServiceProcess, devmodel: DevModel
) -> None:
    call = {"name": "forecast", "arguments": {"city": "Loop"}}
    devmodel.set_script([{"tool_call": call}, {"after_tool": "*", "tool_call": call}])
    async with openai.AsyncOpenAI(base_url=tools_agent.url + "/v1", api_key="x") as oa:
        stream = await oa.chat.completions.create(
            model="a", messages=[{"role": "user", "content": "loop"}], stream=True
        )
        text, finish = "", None
        async for chunk in stream:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
    assert finish == "length"
    assert "limit of 3 reasoning steps" in text


async def test_toolsets_handed_in_are_offered_and_guarded(devmodel: DevModel) -> None:
    """``AgentDeps.toolsets`` replaces the MCP servers; a failing tool still only informs."""

    def brittle(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"broke: {reason}")

    devmodel.set_script(
        [
            {"match": "break", "tool_call": {"name": "brittle", "arguments": {"reason": "x"}}},
            {"after_tool": "brittle", "reply": "Recovered from: {result}"},
        ]
    )
    port = free_port()
    deps = AgentDeps(toolsets=[FunctionToolset([brittle])])
    async with (
        serve_agent(agent_env(devmodel, port, "local-tools"), deps=deps),
        openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x") as oa,
    ):
        answer = await oa.chat.completions.create(
            model="a", messages=[{"role": "user", "content": "break it"}]
        )
    assert "brittle" in (devmodel.requests()[0].get("tools") or [])
    text = answer.choices[0].message.content or ""
    assert text.startswith("Recovered from:") and "broke: x" in text
