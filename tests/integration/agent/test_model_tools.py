"""A model that cannot call tools: the agent answers without them.

The development model's ``devmodel-notools`` refuses any request offering tools with HTTP
400 ``devmodel-notools does not support tools``, as Ollama does for SmolLM2-135M. The
agent (in this event loop, real HTTP both ways) answers that turn again without tools,
remembers it (one warning, ``kaos_agent_model_tools_refused_total``, the gauge
``kaos_agent_model_tools`` at 0) and offers no tools afterwards; ``MODEL_TOOLS=off``
offers none from the start. Any other 400 stays an error.
"""

from __future__ import annotations

import logging

import aiohttp
import openai
import pytest
from kaos_agent.app import AgentDeps
from kaos_agent.tool_support import refuses_tools
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.toolsets import FunctionToolset

from tests.fixtures.agent import agent_env, serve_agent
from tests.support.devmodel import DevModel
from tests.support.procs import free_port

NO_TOOLS = "devmodel-notools"


def forecast(city: str) -> str:
    """Weather forecast for a city."""
    return f"sunny in {city}"


def tool_deps() -> AgentDeps:
    return AgentDeps(toolsets=[FunctionToolset([forecast])])


async def metrics(url: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics") as resp:
        return await resp.text()


async def ask(oa: openai.AsyncOpenAI, text: str, *, stream: bool = False) -> str:
    messages: list[openai.types.chat.ChatCompletionMessageParam] = [
        {"role": "user", "content": text}
    ]
    if not stream:
        answer = await oa.chat.completions.create(model="a", messages=messages)
        return answer.choices[0].message.content or ""
    chunks = await oa.chat.completions.create(model="a", messages=messages, stream=True)
    return "".join([c.choices[0].delta.content or "" async for c in chunks if c.choices])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
async def test_a_refused_turn_is_answered_without_tools_and_remembered(
    devmodel: DevModel, caplog: pytest.LogCaptureFixture, stream: bool
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = agent_env(devmodel, port, "small", MODEL_NAME=NO_TOOLS)
    caplog.set_level(logging.WARNING, logger="kaos_agent.tool_support")
    async with (
        serve_agent(env, deps=tool_deps()),
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as oa,
    ):
        assert await ask(oa, "hello small model", stream=stream) == "Echo: hello small model"
        first = devmodel.requests()
        assert [(r["kind"], r["tools"]) for r in first] == [
            ("tools_refused", ["forecast"]),
            ("echo", []),
        ]
        # From now on no request carries tools: one request per turn, none refused.
        assert await ask(oa, "again", stream=stream) == "Echo: again"
        later = devmodel.requests()[len(first) :]
        assert [(r["kind"], r["tools"]) for r in later] == [("echo", [])]
        text = await metrics(url)
    assert "kaos_agent_model_tools_refused_total 1.0" in text
    assert "kaos_agent_model_tools 0.0" in text
    warnings = [r for r in caplog.records if r.name == "kaos_agent.tool_support"]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING


async def test_a_model_that_takes_tools_keeps_them(devmodel: DevModel) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with (
        serve_agent(agent_env(devmodel, port, "big"), deps=tool_deps()),
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as oa,
    ):
        text = await ask(oa, 'weather [[call forecast {"city": "Oslo"}]]')
        assert text == "Tool forecast returned: sunny in Oslo"
        assert [r["tools"] for r in devmodel.requests()] == [["forecast"], ["forecast"]]
        page = await metrics(url)
    assert "kaos_agent_model_tools_refused_total 0.0" in page
    assert "kaos_agent_model_tools 1.0" in page


async def test_tools_off_offers_none_from_the_start(devmodel: DevModel) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = agent_env(
        devmodel,
        port,
        "off",
        MODEL_NAME=NO_TOOLS,
        MODEL_TOOLS="off",
        AGENT_SUB_AGENTS=f"helper:http://127.0.0.1:{free_port()}",
    )
    async with (
        serve_agent(env, deps=tool_deps()),
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as oa,
        aiohttp.ClientSession() as http,
    ):
        assert await ask(oa, "hi") == "Echo: hi"
        async with http.get(url + "/tools") as resp:
            assert (await resp.json())["tools"] == []
        page = await metrics(url)
    (sent,) = devmodel.requests()
    assert sent["kind"] == "echo" and sent["tools"] == []
    # No peers mentioned in the instructions when they cannot be called.
    assert "delegate" not in sent["messages"][0]["content"]
    assert "kaos_agent_model_tools_refused_total 0.0" in page
    assert "kaos_agent_model_tools 0.0" in page


async def test_any_other_bad_request_stays_an_error(devmodel: DevModel) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    await devmodel.aset_faults(error_rate=1.0, status=400, routes=["chat"])
    async with (
        serve_agent(agent_env(devmodel, port, "strict"), deps=tool_deps()),
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", max_retries=0) as oa,
    ):
        with pytest.raises(openai.APIStatusError) as err:
            await ask(oa, "hi")
        page = await metrics(url)
    assert err.value.status_code == 502
    # One request, not sent again without tools: the refusal was not about tools.
    assert (await devmodel.astats())["errors_injected"] == 1
    assert "kaos_agent_model_tools_refused_total 0.0" in page
    assert "kaos_agent_model_tools 1.0" in page


@pytest.mark.parametrize(
    ("status", "body", "refused"),
    [
        # The OpenAI SDK's body is the inner error object of Ollama's compatible API.
        (400, {"message": "registry.ollama.ai/library/smollm2:135m does not support tools"}, True),
        # Ollama's own API: {"error": "..."}.
        (400, {"error": "smollm2:135m does not support tools"}, True),
        (400, "smollm2:135m does not support tools", True),
        (400, {"message": "smollm2:135m does not support thinking"}, False),
        (400, {"message": "tools: invalid schema"}, False),
        (500, {"message": "smollm2:135m does not support tools"}, False),
        (400, None, False),
    ],
)
def test_only_ollamas_refusal_of_tools_counts(status: int, body: object, refused: bool) -> None:
    exc = ModelHTTPError(status_code=status, model_name="m", body=body)
    assert refuses_tools(exc) is refused
