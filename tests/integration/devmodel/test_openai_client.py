"""The official ``openai`` client against ``kaos-devmodel``: chat, streaming, tools, embeddings."""

from __future__ import annotations

import base64
import json
import math
import struct

import openai
import pytest
from openai import AsyncOpenAI, OpenAI
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessageParam,
)

from tests.support.devmodel import DevModel

WEATHER_TOOL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def ask(text: str) -> list[ChatCompletionMessageParam]:
    return [{"role": "user", "content": text}]


@pytest.fixture
def client(devmodel: DevModel) -> OpenAI:
    return OpenAI(base_url=devmodel.base_url, api_key="x", max_retries=0, timeout=30)


@pytest.fixture
def aclient(devmodel: DevModel) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=devmodel.base_url, api_key="x", max_retries=0, timeout=30)


def test_models_lists_the_configured_names(client: OpenAI) -> None:
    names = [m.id for m in client.models.list()]
    assert names == ["devmodel", "devmodel-embed"]


def test_plain_completion_echoes_the_last_user_message(client: OpenAI) -> None:
    resp = client.chat.completions.create(
        model="any-model-name",
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "hello devmodel"},
        ],
        temperature=0.2,
        max_tokens=50,
        seed=7,
        response_format={"type": "text"},
    )
    assert resp.object == "chat.completion"
    assert resp.model == "any-model-name"
    choice = resp.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content == "Echo: hello devmodel"
    assert choice.message.tool_calls is None
    assert resp.usage is not None
    # Tokens are whitespace words: 3 + 1 + 1 + 2 in, "Echo: hello devmodel" out.
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (7, 3)
    assert resp.usage.total_tokens == 10


def test_content_parts_are_read_as_text(client: OpenAI) -> None:
    resp = client.chat.completions.create(
        model="devmodel",
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "two"}],
            }
        ],
    )
    assert resp.choices[0].message.content == "Echo: part one\ntwo"


async def test_streamed_chunks_reassemble_to_the_plain_answer(aclient: AsyncOpenAI) -> None:
    messages = ask("a longer sentence so that it arrives in pieces")
    plain = await aclient.chat.completions.create(model="devmodel", messages=messages)
    stream = await aclient.chat.completions.create(
        model="devmodel",
        messages=messages,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    assert len([p for p in pieces if p]) > 1
    assert "".join(pieces) == plain.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    assert all(f is None for f in finishes[:-1])
    # The usage chunk comes last, without choices.
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None and plain.usage is not None
    assert last.usage.total_tokens == plain.usage.total_tokens


def with_result(
    question: list[ChatCompletionMessageParam], first: ChatCompletion, result: str
) -> list[ChatCompletionMessageParam]:
    """The conversation after the tool call of ``first`` returned ``result``."""
    (call,) = first.choices[0].message.tool_calls or []
    assert call.type == "function"
    return [
        *question,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": result},
    ]


def only_call(resp: ChatCompletion) -> tuple[str, str, object]:
    """id, name and parsed arguments of the one tool call of ``resp``."""
    (call,) = resp.choices[0].message.tool_calls or []
    assert call.type == "function"
    return call.id, call.function.name, json.loads(call.function.arguments)


def test_scripted_tool_call_then_answer_with_the_result(client: OpenAI, devmodel: DevModel) -> None:
    devmodel.set_script(
        [
            {
                "match": "(?i)weather",
                "tool_call": {"name": "get_weather", "arguments": {"city": "Lisbon"}},
            },
            {"after_tool": "get_weather", "reply": "It is {result} in Lisbon."},
        ]
    )
    question = ask("What is the weather in Lisbon?")
    first = client.chat.completions.create(
        model="devmodel", messages=question, tools=[WEATHER_TOOL], tool_choice="auto"
    )
    assert first.choices[0].finish_reason == "tool_calls"
    assert first.choices[0].message.content is None
    call_id, name, args = only_call(first)
    assert call_id.startswith("call_")
    assert (name, args) == ("get_weather", {"city": "Lisbon"})

    second = client.chat.completions.create(
        model="devmodel", messages=with_result(question, first, "sunny, 24C"), tools=[WEATHER_TOOL]
    )
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "It is sunny, 24C in Lisbon."
    stats = devmodel.stats()
    assert (stats["chat"], stats["scripted"]) == (2, 2)


def test_inline_directive_calls_an_offered_tool_once(client: OpenAI, devmodel: DevModel) -> None:
    question = ask('Please [[call get_weather {"city": "Porto"}]] now')
    first = client.chat.completions.create(
        model="devmodel", messages=question, tools=[WEATHER_TOOL]
    )
    assert first.choices[0].finish_reason == "tool_calls"
    assert only_call(first)[1:] == ("get_weather", {"city": "Porto"})

    second = client.chat.completions.create(
        model="devmodel", messages=with_result(question, first, "rainy"), tools=[WEATHER_TOOL]
    )
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "Tool get_weather returned: rainy"
    assert devmodel.stats()["directive"] == 2


def test_directive_for_a_tool_not_offered_is_plain_text(client: OpenAI) -> None:
    text = "[[call get_weather {}]]"
    resp = client.chat.completions.create(model="devmodel", messages=ask(text))
    assert resp.choices[0].message.content == f"Echo: {text}"


async def test_streamed_tool_call_deltas(aclient: AsyncOpenAI, devmodel: DevModel) -> None:
    await devmodel.aset_script(
        [{"tool_call": {"name": "get_weather", "arguments": {"city": "Faro"}}, "times": 1}]
    )
    stream = await aclient.chat.completions.create(
        model="devmodel", messages=ask("anything"), tools=[WEATHER_TOOL], stream=True
    )
    name, args, ids, finish = "", "", set(), None
    async for chunk in stream:
        delta = chunk.choices[0].delta
        for tc in delta.tool_calls or []:
            assert tc.index == 0
            if tc.id:
                ids.add(tc.id)
            if tc.function and tc.function.name:
                name += tc.function.name
            if tc.function and tc.function.arguments:
                args += tc.function.arguments
        finish = chunk.choices[0].finish_reason or finish
    assert (name, json.loads(args), finish) == ("get_weather", {"city": "Faro"}, "tool_calls")
    assert len(ids) == 1
    # ``times: 1``: the rule is spent, the next request falls through to the echo.
    again = await aclient.chat.completions.create(model="devmodel", messages=ask("anything"))
    assert again.choices[0].message.content == "Echo: anything"


def _dot(a: list[float], b: list[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def test_embeddings_are_unit_deterministic_and_word_sensitive(
    client: OpenAI, devmodel: DevModel
) -> None:
    texts = [
        "The user lives in Lisbon",
        "Where does the user live? Lisbon",
        "Quantum chromodynamics lecture notes",
        "",
    ]
    resp = client.embeddings.create(model="devmodel-embed", input=texts)
    assert [d.index for d in resp.data] == [0, 1, 2, 3]
    vecs = [d.embedding for d in resp.data]
    assert all(len(v) == devmodel.embedding_dims for v in vecs)
    # The client asks for base64 (float32) unless told otherwise: unit to float32 precision.
    assert all(math.isclose(math.sqrt(_dot(v, v)), 1.0, rel_tol=1e-6) for v in vecs)
    again = client.embeddings.create(model="devmodel-embed", input=texts[0])
    assert again.data[0].embedding == vecs[0]
    assert _dot(vecs[0], vecs[1]) > _dot(vecs[0], vecs[2])
    assert resp.usage.prompt_tokens == 5 + 6 + 4 + 0


def test_embeddings_honour_dimensions_and_both_encodings(client: OpenAI) -> None:
    small = client.embeddings.create(model="e", input="hello world", dimensions=16)
    assert len(small.data[0].embedding) == 16
    floats = client.embeddings.create(model="e", input="hello world", encoding_format="float")
    packed = client.embeddings.create(model="e", input="hello world", encoding_format="base64")
    raw: list[float] | str = packed.data[0].embedding
    if isinstance(raw, str):  # clients that leave decoding to the caller
        data = base64.b64decode(raw)
        raw = list(struct.unpack(f"<{len(data) // 4}f", data))
    expected = floats.data[0].embedding
    assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(raw, expected, strict=True))


def test_error_rate_one_gives_internal_server_errors(client: OpenAI, devmodel: DevModel) -> None:
    devmodel.set_faults(error_rate=1.0, routes=["chat"])
    with pytest.raises(openai.InternalServerError) as info:
        client.chat.completions.create(model="devmodel", messages=ask("x"))
    assert info.value.status_code == 500
    # Embeddings are not in the fault's routes.
    client.embeddings.create(model="e", input="still fine")
    assert devmodel.stats()["errors_injected"] == 1


def test_injected_status_is_configurable(client: OpenAI, devmodel: DevModel) -> None:
    devmodel.set_faults(error_rate=1.0, status=503, routes=["embeddings"])
    with pytest.raises(openai.APIStatusError) as info:
        client.embeddings.create(model="e", input="x")
    assert info.value.status_code == 503


def test_seeded_error_rate_fails_the_same_requests_after_each_reset(
    client: OpenAI, devmodel: DevModel
) -> None:
    def outcomes() -> list[bool]:
        devmodel.reset()
        devmodel.set_faults(error_rate=0.5)
        seen = []
        for _ in range(12):
            try:
                client.embeddings.create(model="e", input="x")
                seen.append(True)
            except openai.InternalServerError:
                seen.append(False)
        return seen

    first = outcomes()
    assert first == outcomes()
    assert True in first and False in first


def test_hang_times_the_client_out_and_reset_releases(client: OpenAI, devmodel: DevModel) -> None:
    devmodel.set_faults(hang=True, routes=["chat"])
    with pytest.raises(openai.APITimeoutError):
        client.with_options(timeout=0.5).chat.completions.create(
            model="devmodel", messages=ask("x")
        )
    assert devmodel.stats()["hangs"] == 1
    devmodel.reset()
    resp = client.chat.completions.create(model="devmodel", messages=ask("x"))
    assert resp.choices[0].message.content == "Echo: x"


def test_delay_still_answers(client: OpenAI, devmodel: DevModel) -> None:
    assert devmodel.set_faults(delay=0.05)["delay"] == 0.05
    resp = client.chat.completions.create(model="devmodel", messages=ask("y"))
    assert resp.choices[0].message.content == "Echo: y"


def test_bad_requests_are_rejected_with_400(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="devmodel", messages=[])
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model="devmodel", messages=[], extra_body={"messages": [{"role": "wizard"}]}
        )
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="e", input=[[1, 2, 3]])
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="e", input=[])
