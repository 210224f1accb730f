"""The loop's Chat Completions client (``kaos_agent.model_client``) and the one-request run
(``kaos_agent.one_request``) send what the SDK and the graph sent, and fail as they failed.

A model server in this event loop records every request body as it arrived and answers
from a script, so the checks compare the exact JSON a model receives: through aiohttp and
through the OpenAI SDK (pydantic-ai's own ``OpenAIChatModel``), through the one-request
path and through pydantic-ai's graph.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kaos_agent.context import RunDeps
from kaos_agent.loop import _token_cap_as_max_tokens, build_agent, request_settings
from kaos_agent.memory.base import NoMemory, Recalled
from kaos_agent.metrics import AgentMetrics
from kaos_agent.model_client import ChatCompletionsModel
from kaos_agent.one_request import OneRequest
from kaos_agent.runner import AgentRuntime
from kaos_agent.settings import DelegationSettings, ModelSettings
from prometheus_client import CollectorRegistry
from pydantic_ai import Agent
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.toolsets import FunctionToolset

from tests.support.procs import free_port

Answer = Callable[[dict[str, Any]], web.StreamResponse]


def completion(text: str | None = None, tool: tuple[str, str] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool is not None:
        message["tool_calls"] = [
            {
                "id": "call-1",
                "type": "function",
                "function": {"name": tool[0], "arguments": tool[1]},
            }
        ]
    return {
        "id": "c-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool else "stop"}
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def sse(*docs: dict[str, Any] | str) -> bytes:
    return b"".join(
        f"data: {d if isinstance(d, str) else json.dumps(d)}\n\n".encode() for d in docs
    )


def chunk(content: str | None, finish: str | None = None, usage: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": "c-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": []
        if usage
        else [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
    }
    if usage:
        doc["usage"] = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    return doc


@dataclass
class ModelServer:
    url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    # Answers in order; the last one repeats.
    script: list[web.Response] = field(default_factory=list)


@asynccontextmanager
async def model_server() -> AsyncIterator[ModelServer]:
    port = free_port()
    server = ModelServer(url=f"http://127.0.0.1:{port}/v1")

    async def chat(request: web.Request) -> web.Response:
        server.bodies.append(await request.json())
        server.headers.append(dict(request.headers))
        answer = server.script[0] if len(server.script) == 1 else server.script.pop(0)
        return web.Response(body=answer.body, status=answer.status, headers=answer.headers)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    test_server = TestServer(app, host="127.0.0.1", port=port)
    await test_server.start_server()
    try:
        yield server
    finally:
        await test_server.close()


def reply(doc: dict[str, Any] | bytes, status: int = 200, **headers: str) -> web.Response:
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    kind = "text/event-stream" if isinstance(doc, bytes) else "application/json"
    return web.Response(body=body, status=status, headers={"Content-Type": kind, **headers})


def settings(url: str, **sampling: object) -> ModelSettings:
    env = {"MODEL_API_URL": url, "MODEL_NAME": "m", "MODEL_API_KEY": "sk-test"}
    env |= {f"MODEL_{k.upper()}": str(v) for k, v in sampling.items()}
    return ModelSettings.from_env(env)


def sdk_model(url: str) -> Model:
    provider = OpenAIProvider(base_url=url, api_key="sk-test")
    return OpenAIChatModel("m", provider=provider, profile=_token_cap_as_max_tokens)


@asynccontextmanager
async def kaos_model(url: str, **options: Any) -> AsyncIterator[ChatCompletionsModel]:
    async with aiohttp.ClientSession() as http:
        yield ChatCompletionsModel(
            "m",
            base_url=url,
            api_key="sk-test",
            http=http,
            profile=_token_cap_as_max_tokens,
            sleep=_no_wait,
            **options,
        )


SLEPT: list[float] = []


async def _no_wait(seconds: float) -> None:
    SLEPT.append(seconds)


def weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


HISTORY: list[ModelMessage] = [
    ModelRequest(parts=[UserPromptPart("I live in Lisbon")]),
    ModelResponse(parts=[TextPart("Noted.")]),
]


def tool_less_runtime(
    model: ChatCompletionsModel,
    model_settings: ModelSettings,
    *,
    instructions: str = "",
    memory: NoMemory | None = None,
    one_request: bool = True,
) -> AgentRuntime:
    """A tool-less agent's runtime on ``model``, with or without the one-request path."""
    agent: Agent[RunDeps, str] = build_agent(
        name="a",
        instructions=instructions,
        model=model,
        model_settings=model_settings,
        delegation=DelegationSettings.from_env({}),
        toolsets=[],
    )
    return AgentRuntime(
        agent,
        memory or NoMemory(),
        AgentMetrics.create(CollectorRegistry()),
        max_steps=5,
        one_request=(
            OneRequest(model, instructions, request_settings(model_settings))
            if one_request
            else None
        ),
    )


async def run_with(model: Model, model_settings: ModelSettings, *, tools: bool) -> str:
    agent = build_agent(
        name="a",
        instructions="Be brief.",
        model=model,
        model_settings=model_settings,
        delegation=DelegationSettings.from_env({}),
        toolsets=[FunctionToolset([weather])] if tools else [],
    )
    result = await agent.run("weather in Rome?", message_history=HISTORY, deps=RunDeps("s-1"))
    return result.output


async def test_the_body_is_the_sdks_with_tools_history_and_sampling() -> None:
    """The same run (history, a tool call and its result, sampling settings) through the
    SDK and through aiohttp: the model receives the same JSON, request by request."""
    script = [reply(completion(tool=("weather", '{"city": "Rome"}'))), reply(completion("Sunny."))]
    bodies = []
    for make in ("sdk", "kaos"):
        async with model_server() as server:
            server.script = list(script)
            sampled = settings(server.url, temperature=0.2, max_tokens=64, top_p=0.9, seed=7)
            if make == "sdk":
                output = await run_with(sdk_model(server.url), sampled, tools=True)
            else:
                async with kaos_model(server.url) as model:
                    output = await run_with(model, sampled, tools=True)
            assert output == "Sunny."
            assert len(server.bodies) == 2
            assert all(h["Authorization"] == "Bearer sk-test" for h in server.headers)
            bodies.append(server.bodies)

    assert bodies[1] == bodies[0]
    first = bodies[1][0]
    assert first["max_tokens"] == 64 and first["temperature"] == 0.2
    assert [t["function"]["name"] for t in first["tools"]] == ["weather"]
    assert bodies[1][1]["messages"][-1]["role"] == "tool"


class FactsMemory(NoMemory):
    async def recall(self, deps: RunDeps, query: str) -> Recalled:
        return Recalled(facts_block="Known facts:\n- lives in Lisbon")


@pytest.mark.parametrize("stream", [False, True])
async def test_one_request_sends_what_the_graph_sends(stream: bool) -> None:
    """A tool-less run through ``OneRequest`` and through pydantic-ai's graph: the same
    body (instructions joined with the recalled facts, the client's history, the prompt),
    the same answer, the same turns to remember."""
    answer = (
        reply(
            sse(chunk("Sun"), chunk("ny."), chunk(None, "stop"), chunk(None, usage=True), "[DONE]")
        )
        if stream
        else reply(completion("Sunny."))
    )
    seen = []
    for one in (False, True):
        async with model_server() as server, kaos_model(server.url) as model:
            server.script = [answer]
            runtime = tool_less_runtime(
                model,
                settings(server.url),
                instructions="Be brief.",
                memory=FactsMemory(),
                one_request=one,
            )
            deps = RunDeps("s-1")
            if stream:
                text = "".join(
                    [
                        d
                        async for d in runtime.stream(
                            "weather?", deps, entry="chat", client_history=HISTORY
                        )
                    ]
                )
            else:
                outcome = await runtime.run("weather?", deps, entry="chat", client_history=HISTORY)
                text = outcome.text
                assert (outcome.finish_reason, outcome.steps) == ("stop", 1)
                assert [(t.role, t.content) for t in outcome.turns] == [
                    ("user", "weather?"),
                    ("assistant", "Sunny."),
                ]
                assert outcome.usage.total_tokens == 5
            assert text == "Sunny."
            assert len(server.bodies) == 1
            seen.append(server.bodies[0])

    assert seen[1] == seen[0]
    assert seen[1]["messages"][:2] == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Known facts:\n- lives in Lisbon"},
    ]
    assert seen[1]["stream"] is stream


async def test_an_error_status_is_the_providers_error_object() -> None:
    refusal = {"error": {"message": "m does not support tools", "type": "api_error"}}
    async with model_server() as server, kaos_model(server.url) as model:
        server.script = [reply(refusal, status=400)]
        with pytest.raises(ModelHTTPError) as raised:
            await model.request(
                [ModelRequest(parts=[UserPromptPart("hi")])], None, ModelRequestParameters()
            )

    assert raised.value.status_code == 400
    assert raised.value.body == refusal["error"]
    assert len(server.bodies) == 1  # a 400 is not retried


async def test_a_retryable_status_is_retried_twice_with_backoff() -> None:
    SLEPT.clear()
    async with model_server() as server, kaos_model(server.url) as model:
        server.script = [
            reply({"error": {"message": "busy"}}, status=503),
            reply({"error": {"message": "slow down"}}, status=429, **{"Retry-After": "3"}),
            reply(completion("at last")),
        ]
        response = await model.request(
            [ModelRequest(parts=[UserPromptPart("hi")])], None, ModelRequestParameters()
        )

    assert response.text == "at last"
    assert len(server.bodies) == 3
    assert 0.375 <= SLEPT[0] <= 0.5 and SLEPT[1] == 3.0


async def test_retries_end_in_the_last_error() -> None:
    async with model_server() as server, kaos_model(server.url) as model:
        server.script = [reply({"error": {"message": "down"}}, status=502)]
        with pytest.raises(ModelHTTPError) as raised:
            await model.request(
                [ModelRequest(parts=[UserPromptPart("hi")])], None, ModelRequestParameters()
            )

    assert raised.value.status_code == 502
    assert len(server.bodies) == 3


async def test_no_server_is_a_connection_error() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    async with kaos_model(url) as model:
        with pytest.raises(ModelConnectionError):
            await model.request(
                [ModelRequest(parts=[UserPromptPart("hi")])], None, ModelRequestParameters()
            )


@contextmanager
def dropping_listener() -> Iterator[str]:
    """The URL of a port whose connections never open: its accept queue is full, so the
    kernel drops every further SYN, as a Service's traffic to a pod that is gone is
    dropped."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        queued = []
        try:
            # A backlog of 0 holds one connection; the second makes sure it is full.
            for _ in range(2):
                client = socket.socket()
                client.setblocking(False)
                client.connect_ex(("127.0.0.1", port))
                queued.append(client)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            for client in queued:
                client.close()


async def test_a_connection_that_does_not_open_is_retried_not_waited_on() -> None:
    SLEPT.clear()
    with dropping_listener() as url:
        async with kaos_model(url, connect_timeout=0.2) as model:
            # Well within the model's own timeout: the client gives up on the connection,
            # not on the model.
            async with asyncio.timeout(30):
                with pytest.raises(ModelConnectionError):
                    await model.request(
                        [ModelRequest(parts=[UserPromptPart("hi")])],
                        {"timeout": 60},
                        ModelRequestParameters(),
                    )
    # Three tries, each on a new connection, with a backoff before each retry.
    assert len(SLEPT) == 2


async def test_an_answer_that_is_not_json_is_unexpected() -> None:
    async with model_server() as server, kaos_model(server.url) as model:
        server.script = [web.Response(body=b"<html>proxy</html>", content_type="text/html")]
        with pytest.raises(UnexpectedModelBehavior):
            await model.request(
                [ModelRequest(parts=[UserPromptPart("hi")])], None, ModelRequestParameters()
            )


async def test_an_error_inside_a_stream_is_an_error_not_text() -> None:
    events = sse(chunk("Hal"), {"error": {"message": "the model crashed"}})
    async with model_server() as server, kaos_model(server.url) as model:
        server.script = [reply(events)]
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("hi")])]
        with pytest.raises(ModelAPIError) as raised:
            async with model.request_stream(messages, None, ModelRequestParameters()) as stream:
                async for _ in stream:
                    pass

    assert "the model crashed" in str(raised.value)


async def test_a_tool_call_a_tool_less_agent_was_not_offered_goes_to_the_graph() -> None:
    """The one-request path takes only a plain text answer; anything else is run by the
    graph, which handles it as before (here: answers the unknown tool, asks again)."""
    async with model_server() as server, kaos_model(server.url) as model:
        server.script = [
            reply(completion(tool=("weather", "{}"))),
            reply(completion(tool=("weather", "{}"))),
            reply(completion("Sunny.")),
        ]
        runtime = tool_less_runtime(model, settings(server.url))
        outcome = await runtime.run("weather?", RunDeps("s-1"), entry="chat")

    assert outcome.text == "Sunny."
    # The one request, then the graph's: its own first request and its retry.
    assert len(server.bodies) == 3
    assert server.bodies[2]["messages"][-1]["role"] == "tool"


async def test_a_lenient_answer_is_taken_as_the_sdk_took_it() -> None:
    """A provider that sends a null where the SDK's types want a value (``created``, the
    finish reason) is answered, as through the SDK, which builds answers unvalidated."""
    lenient = completion("fine") | {"created": None}
    lenient["choices"][0]["finish_reason"] = None
    events = sse(chunk("fi") | {"created": None}, chunk("ne", "stop"), "[DONE]")
    async with model_server() as server, kaos_model(server.url) as model:
        server.script = [reply(lenient), reply(events)]
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("hi")])]
        plain = await model.request(messages, None, ModelRequestParameters())
        async with model.request_stream(messages, None, ModelRequestParameters()) as stream:
            async for _ in stream:
                pass
            streamed = stream.get()

    assert (plain.text, plain.finish_reason) == ("fine", "stop")
    assert streamed.text == "fine"


def tool_call_events() -> bytes:
    call = {"index": 0, "id": "call-1", "type": "function"}
    call["function"] = {"name": "weather", "arguments": "{}"}
    delta = {"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": "tool_calls"}
    return sse(chunk(None) | {"choices": [delta]}, "[DONE]")


async def test_a_streamed_tool_call_before_any_text_goes_to_the_graph() -> None:
    async with model_server() as server, kaos_model(server.url) as model:
        server.script = [
            reply(tool_call_events()),
            reply(tool_call_events()),
            reply(sse(chunk("Sun"), chunk("ny.", "stop"), "[DONE]")),
        ]
        runtime = tool_less_runtime(model, settings(server.url))
        text = "".join([d async for d in runtime.stream("weather?", RunDeps("s-1"), entry="chat")])

    assert text == "Sunny."
    assert len(server.bodies) == 3
    assert all(body["stream"] for body in server.bodies)
