"""A tool-less run's streamed answer read from the chunks (``kaos_agent.text_stream``)
against the same stream read by pydantic-ai, over real HTTP from a scripted model: the
same text deltas, the same answer (text, thinking, usage), whatever the stream holds
(plain text, reasoning first, a thinking tag, a tool call after text, usage), and the
request metered the same."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_agent.model_client import ChatCompletionsModel
from kaos_agent.one_request import OneRequest
from kaos_agent.telemetry import MeteredModel
from kaos_core.telemetry.genai_metrics import GenAiMetrics
from prometheus_client import CollectorRegistry
from pydantic_ai.messages import ModelResponse, TextPart, ThinkingPart
from pydantic_ai.models.wrapper import WrapperModel

from tests.integration.agent.test_model_client import (
    chunk,
    kaos_model,
    model_server,
    reply,
    sse,
)


class Opaque(WrapperModel):
    """The same client behind a wrapper the chunk reader does not know: pydantic-ai reads."""


def delta(**fields: Any) -> dict[str, Any]:
    return chunk(None) | {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


TOOL_CALL = {"index": 0, "id": "call-1", "type": "function"} | {
    "function": {"name": "weather", "arguments": "{}"}
}
STREAMS = {
    "plain": [chunk("Sun"), chunk("ny."), chunk(None, "stop"), chunk(None, usage=True)],
    "reasoning first": [
        delta(role="assistant", content=""),
        delta(reasoning_content="Rome in May"),
        delta(reasoning_content=" is warm."),
        chunk("Sun"),
        chunk("ny.", "stop"),
        chunk(None, usage=True),
    ],
    "thinking tag": [chunk("<think>"), chunk("mull"), chunk("</think>"), chunk("Sunny.", "stop")],
    "tool call after text": [chunk("Let me check"), delta(tool_calls=[TOOL_CALL])],
    "whitespace first": [chunk("\n"), chunk("Sunny."), chunk(None, "length")],
    # The model copied the joiner pydantic-ai put inside a special token on the way out.
    "copied joiner": [chunk("say <"), chunk("\u200d|im_end|> now"), chunk(None, "stop")],
}


def parts(response: ModelResponse | None) -> list[tuple[str, str]] | None:
    if response is None:
        return None
    return [(type(p).__name__, getattr(p, "content", "")) for p in response.parts]


async def read(model: Any, stream: list[dict[str, Any]]) -> tuple[list[str], Any, Any, float]:
    """The deltas, the answer's parts, its usage and the tokens metered, for ``model``."""
    registry = CollectorRegistry()
    metrics = GenAiMetrics.create(registry)
    async with model_server() as server, kaos_model(server.url) as client:
        server.script = [reply(sse(*stream, "[DONE]"))]
        wrapped = MeteredModel(client, metrics, "a") if model is MeteredModel else Opaque(client)
        one = OneRequest(wrapped, "Be brief.", {"timeout": 10.0})
        request = one.request("weather?", [], None, "s-1")
        async with one.stream(request) as text:
            deltas = [d async for d in text]
        answer = text.response
        usage = None if answer is None else (answer.usage.input_tokens, answer.usage.output_tokens)
    metered = (
        registry.get_sample_value(
            "gen_ai_client_token_usage_sum",
            {
                "gen_ai_agent_name": "a",
                "gen_ai_operation_name": "chat",
                "gen_ai_request_model": "m",
                "gen_ai_token_type": "output",
            },
        )
        or 0.0
    )
    return deltas, parts(answer), usage, metered


# Whether pydantic-ai's streamed response takes over the stream from the chunk reader.
HANDED_OVER = {
    "plain": False,
    "reasoning first": True,
    "thinking tag": True,
    "tool call after text": True,
    "whitespace first": False,
    "copied joiner": True,
}


@pytest.mark.parametrize("name", list(STREAMS))
async def test_the_chunk_reader_reads_what_pydantic_ai_reads(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = STREAMS[name]
    built = []
    process = ChatCompletionsModel._process_streamed_response

    async def counted(self: ChatCompletionsModel, *args: Any, **kwargs: Any) -> Any:
        built.append(1)
        return await process(self, *args, **kwargs)

    monkeypatch.setattr(ChatCompletionsModel, "_process_streamed_response", counted)
    fast = await read(MeteredModel, stream)
    assert bool(built) is HANDED_OVER[name]
    slow = await read(Opaque, stream)
    assert fast[:3] == slow[:3]
    if "usage" in str(stream):
        assert fast[3] == 2.0  # the request metered with the tokens it reported


def test_the_streams_cover_what_they_say() -> None:
    """The cases above are the ones they name (guards the table against drifting)."""
    kinds = {name: str(stream) for name, stream in STREAMS.items()}
    assert "reasoning_content" in kinds["reasoning first"]
    assert "<think>" in kinds["thinking tag"]
    assert "tool_calls" in kinds["tool call after text"]


async def test_plain_text_and_thinking_come_out_as_pydantic_ai_builds_them() -> None:
    deltas, answer, usage, _ = await read(MeteredModel, STREAMS["reasoning first"])
    assert "".join(deltas) == "Sunny."
    assert answer == [("ThinkingPart", "Rome in May is warm."), ("TextPart", "Sunny.")]
    assert usage == (3, 2)
    deltas, answer, _, _ = await read(MeteredModel, STREAMS["thinking tag"])
    assert "".join(deltas) == "Sunny." and answer is not None
    assert [kind for kind, _ in answer] == [ThinkingPart.__name__, TextPart.__name__]
    deltas, answer, _, _ = await read(MeteredModel, STREAMS["tool call after text"])
    assert "".join(deltas) == "Let me check" and answer is None
    deltas, answer, _, _ = await read(MeteredModel, STREAMS["copied joiner"])
    assert "".join(deltas) == "say <|im_end|> now"
    assert answer == [("TextPart", "say <|im_end|> now")]
