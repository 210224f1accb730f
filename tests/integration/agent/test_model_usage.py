"""Token usage and sampling: the agent's answers carry what the model reported.

The agent in this event loop (``serve_agent``) against the development model, which
reports whitespace-word token counts and records each request's usage and sampling
parameters: the chat completion's ``usage`` (plain, and the last chunk of a stream that
asks for it) is the sum over the run's model requests, and so are the token histograms
on ``/metrics``; ``MODEL_TEMPERATURE`` and friends reach every model request.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
from kaos_agent.app import AgentDeps
from pydantic_ai.toolsets import FunctionToolset

from tests.fixtures.agent import agent_env, serve_agent
from tests.support.devmodel import DevModel
from tests.support.procs import free_port


def forecast(city: str) -> str:
    """Weather forecast for a city."""
    return f"sunny in {city}"


TOOL_RUN = 'weather [[call forecast {"city": "Rome"}]]'


def reported(devmodel: DevModel) -> dict[str, int]:
    """What the model reported over every request it answered, summed."""
    usages = [r["usage"] for r in devmodel.requests()]
    return {k: sum(u[k] for u in usages) for k in ("prompt_tokens", "completion_tokens")}


async def metric(url: str, name: str, token_type: str) -> float:
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics") as resp:
        text = await resp.text()
    for line in text.splitlines():
        if line.startswith(name + "{") and f'gen_ai_token_type="{token_type}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_usage_is_the_sum_of_what_the_model_reported(devmodel: DevModel) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    deps = AgentDeps(toolsets=[FunctionToolset([forecast])])
    async with (
        serve_agent(agent_env(devmodel, port, "usage"), deps=deps),
        openai.AsyncOpenAI(base_url=url + "/v1", api_key="x") as oa,
    ):
        answer = await oa.chat.completions.create(
            model="usage", messages=[{"role": "user", "content": TOOL_RUN}]
        )
        assert answer.choices[0].message.content == "Tool forecast returned: sunny in Rome"
        # Two model requests: the tool call, then the answer.
        assert len(devmodel.requests()) == 2
        model = reported(devmodel)
        assert answer.usage is not None
        assert answer.usage.prompt_tokens == model["prompt_tokens"] > 0
        assert answer.usage.completion_tokens == model["completion_tokens"] > 0
        assert answer.usage.total_tokens == sum(model.values())
        # The token histograms on /metrics add up to the same figures.
        total = "gen_ai_client_token_usage_sum"
        assert await metric(url, total, "input") == model["prompt_tokens"]
        assert await metric(url, total, "output") == model["completion_tokens"]


async def stream_chunks(oa: openai.AsyncOpenAI, text: str, **extra: Any) -> list[Any]:
    stream = await oa.chat.completions.create(
        model="usage", messages=[{"role": "user", "content": text}], stream=True, **extra
    )
    return [chunk async for chunk in stream]


async def test_a_stream_ends_with_the_usage_when_asked(devmodel: DevModel) -> None:
    port = free_port()
    deps = AgentDeps(toolsets=[FunctionToolset([forecast])])
    async with (
        serve_agent(agent_env(devmodel, port, "usage"), deps=deps),
        openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x") as oa,
    ):
        chunks = await stream_chunks(oa, TOOL_RUN, stream_options={"include_usage": True})
        # The agent asked the model for usage on every streamed request.
        assert [r["stream_usage"] for r in devmodel.requests()] == [True, True]
        model = reported(devmodel)
        last = chunks[-1]
        assert last.choices == [] and last.usage is not None
        assert last.usage.prompt_tokens == model["prompt_tokens"] > 0
        assert last.usage.completion_tokens == model["completion_tokens"] > 0
        assert all(c.usage is None for c in chunks[:-1])
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == "Tool forecast returned: sunny in Rome"
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"

        # Not asked, no usage chunk (as OpenAI's).
        plain = await stream_chunks(oa, "no usage please")
        assert all(c.choices and c.usage is None for c in plain)


async def test_sampling_settings_reach_every_model_request(devmodel: DevModel) -> None:
    port = free_port()
    env = agent_env(
        devmodel,
        port,
        "sampled",
        MODEL_TEMPERATURE="0",
        MODEL_MAX_TOKENS="64",
        MODEL_TOP_P="0.5",
        MODEL_SEED="42",
    )
    deps = AgentDeps(toolsets=[FunctionToolset([forecast])])
    async with (
        serve_agent(env, deps=deps),
        openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x") as oa,
    ):
        await oa.chat.completions.create(
            model="sampled", messages=[{"role": "user", "content": TOOL_RUN}]
        )
        await stream_chunks(oa, "and streamed")
    sent = [r["sampling"] for r in devmodel.requests()]
    # A token cap goes as max_tokens, which every OpenAI-compatible server reads.
    expected = {"temperature": 0.0, "max_tokens": 64, "top_p": 0.5, "seed": 42}
    assert sent == [expected, expected, expected]


async def test_without_sampling_settings_none_are_sent(devmodel: DevModel) -> None:
    port = free_port()
    async with (
        serve_agent(agent_env(devmodel, port, "plain")),
        openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="x") as oa,
    ):
        await oa.chat.completions.create(
            model="plain", messages=[{"role": "user", "content": "hi"}]
        )
    assert devmodel.requests()[0]["sampling"] == {}
