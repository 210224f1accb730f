"""Answers in OpenAI's chat completion shapes: one object, or a stream of chunks.

A stream is: a first chunk with the assistant role, the content in a few deltas of up to
``WORDS_PER_CHUNK`` words (or, for tool calls, per call one delta with id and name and one
with the arguments), a chunk with ``finish_reason``, a usage chunk with no choices when
``stream_options.include_usage`` asked for it, then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kaos_devmodel.chat import Answer
from kaos_devmodel.protocol import Message, Usage, word_count

WORDS_PER_CHUNK = 3
_PIECE = re.compile(r"\s*\S+\s*")


@dataclass(frozen=True)
class IssuedCall:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Completion:
    """An answer with the ids it was issued under."""

    id: str
    created: int
    model: str
    answer: Answer
    calls: tuple[IssuedCall, ...]
    usage: Usage
    # The answer stopped at a token limit (an injected ``cut_off`` fault).
    cut_off: bool = False

    @property
    def finish_reason(self) -> str:
        if self.cut_off:
            return "length"
        return "tool_calls" if self.calls else "stop"


def usage_of(messages: list[Message], answer: Answer) -> Usage:
    prompt = sum(word_count(m.text()) for m in messages)
    completion = word_count(answer.content or "") + sum(
        word_count(c.name) + word_count(c.arguments) for c in answer.tool_calls
    )
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion
    )


def _tool_call(call: IssuedCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def completion_body(c: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": c.answer.content}
    if c.calls:
        message["tool_calls"] = [_tool_call(call) for call in c.calls]
    return {
        "id": c.id,
        "object": "chat.completion",
        "created": c.created,
        "model": c.model,
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": c.finish_reason}
        ],
        "usage": c.usage.model_dump(),
    }


def content_pieces(text: str) -> list[str]:
    """``text`` in pieces of a few words that concatenate back to exactly ``text``."""
    # Each match is a word with the whitespace around it, so the matches cover the text.
    words = _PIECE.findall(text)
    if not words:
        return [text] if text else []
    return ["".join(words[i : i + WORDS_PER_CHUNK]) for i in range(0, len(words), WORDS_PER_CHUNK)]


def stream_chunks(c: Completion, *, include_usage: bool) -> Iterator[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": c.id,
            "object": "chat.completion.chunk",
            "created": c.created,
            "model": c.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        return body

    yield chunk({"role": "assistant", "content": ""})
    for piece in content_pieces(c.answer.content or ""):
        yield chunk({"content": piece})
    for index, call in enumerate(c.calls):
        yield chunk(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        yield chunk({"tool_calls": [{"index": index, "function": {"arguments": call.arguments}}]})
    yield chunk({}, c.finish_reason)
    if include_usage:
        yield {
            "id": c.id,
            "object": "chat.completion.chunk",
            "created": c.created,
            "model": c.model,
            "choices": [],
            "usage": c.usage.model_dump(),
        }


def sse_event(body: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(body, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


SSE_DONE = b"data: [DONE]\n\n"
