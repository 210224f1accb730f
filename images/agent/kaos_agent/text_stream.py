"""A tool-less run's streamed answer as text deltas, read from the model's chunks.

pydantic-ai turns every streamed chunk into events through its streamed response, its
parts manager and the iterators around them; for a run that offers no tools and takes a
text answer (``kaos_agent.one_request``) that was most of the time between the model's
first token and the agent's (docs/benchmarks.md, "agent runtime"). ``open_text_stream``
reads the chunks of KAOS's own Chat Completions client itself while they are plain text:
each ``content`` delta goes out as it arrives, as pydantic-ai's parts manager would emit it
(a leading whitespace-only delta dropped when the profile says so, empty ones nothing).

The first chunk that is anything else (reasoning, a tool call, a refusal, a thinking
tag, content given as parts, log probabilities, annotations) hands the stream to
pydantic-ai: its streamed response is built over the chunks seen so far and the rest, so
everything after is read exactly as before, and the text already sent is not sent again.
So does an answer holding a zero-width character where the model's profile breaks special
tokens on the way out (the character may be a joiner the model copied, which pydantic-ai
takes out). A request KAOS's client sends through the OpenAI SDK always goes through
pydantic-ai.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

from openai import AsyncStream
from openai.types.chat import ChatCompletionChunk
from pydantic_ai._special_tokens import StreamRestorer
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ThinkingPartDelta,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.profiles import DEFAULT_THINKING_TAGS
from pydantic_ai.settings import ModelSettings
from pydantic_ai.usage import RequestUsage

from kaos_agent.model_client import ChatCompletionsModel, chat_usage, fast_path
from kaos_agent.telemetry import MeteredModel

# Records one model request: its duration and the usage it reported (or None).
Record = Callable[[float, RequestUsage | None], None]
_FINISH = {"stop": "stop", "length": "length", "content_filter": "content_filter"}
_REASONING_FIELDS = ("reasoning", "reasoning_content")
# What pydantic-ai's special-token breaking puts inside a token (and takes out of answers).
_ZERO_WIDTH = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")


class TextStream:
    """The answer's text deltas (``async for``); then ``response``: the answer when it was
    plain text (text and thinking), else ``None`` (the graph's to handle)."""

    def __init__(self, deltas: AsyncIterator[str]) -> None:
        self._deltas = deltas
        self.response: ModelResponse | None = None

    def __aiter__(self) -> AsyncIterator[str]:
        return self._deltas


def plain_event(event: object) -> bool:
    """Whether a stream event belongs to a plain text answer (text or thinking)."""
    if isinstance(event, PartStartEvent):
        return isinstance(event.part, TextPart | ThinkingPart)
    if isinstance(event, PartDeltaEvent):
        return isinstance(event.delta, TextPartDelta | ThinkingPartDelta)
    return True


def text_delta(event: object) -> str:
    if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
        return event.part.content
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return event.delta.content_delta
    return ""


def _plain(
    chunk: ChatCompletionChunk, start_tag: str | None, custom: str | None, restores: bool
) -> bool:
    """Whether ``chunk`` carries nothing but text (or nothing at all) that pydantic-ai would
    pass on unchanged: with special tokens broken on the way out (``restores``), a zero-width
    character in the answer may be a joiner the model copied, which pydantic-ai removes."""
    if not chunk.choices:
        return True
    choice = chunk.choices[0]
    delta = choice.delta
    # Azure's content filter sends chunks without a delta (the SDK lets them through).
    if delta is None:
        return True
    content = delta.content
    if content is not None and not isinstance(content, str):
        return False
    if content is not None and start_tag is not None and content == start_tag:
        return False
    if restores and content and _ZERO_WIDTH.search(content):
        return False
    if delta.refusal or delta.tool_calls or delta.function_call or choice.logprobs:
        return False
    fields = (*_REASONING_FIELDS, custom) if custom else _REASONING_FIELDS
    return not any(getattr(delta, f, None) for f in (*fields, "annotations"))


class _Replay:
    """The chunks read so far, then the rest: what pydantic-ai's streamed response takes
    over from (an ``AsyncStream`` for it; closing it is the caller's)."""

    def __init__(self, seen: list[ChatCompletionChunk], rest: AsyncIterator[ChatCompletionChunk]):
        self._seen = seen
        self._rest = rest

    async def __aenter__(self) -> _Replay:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def close(self) -> None:
        return None

    async def _chunks(self) -> AsyncIterator[ChatCompletionChunk]:
        for chunk in self._seen:
            yield chunk
        async for chunk in self._rest:
            yield chunk

    def __aiter__(self) -> AsyncIterator[ChatCompletionChunk]:
        return self._chunks()


def _usage(chunk: ChatCompletionChunk) -> RequestUsage | None:
    if chunk.usage is None:
        return None
    return chat_usage(chunk.usage)


def chunk_client(model: Model) -> tuple[ChatCompletionsModel, Record | None] | None:
    """The client whose chunks are read here (and how its requests are metered), or None:
    pydantic-ai reads them (another client)."""
    record: Record | None = model.record if isinstance(model, MeteredModel) else None
    client = model.wrapped if isinstance(model, MeteredModel) else model
    if not isinstance(client, ChatCompletionsModel):
        return None
    return client, record


def prepared(
    client: ChatCompletionsModel, settings: ModelSettings | None, params: ModelRequestParameters
) -> tuple[ModelSettings | None, ModelRequestParameters] | None:
    """The request as the client sends it, when it goes through KAOS's transport."""
    model_settings, model_params = client.prepare_request(settings, params)
    if not fast_path(dict(model_settings or {}), model_params):  # type: ignore[arg-type]
        return None
    return model_settings, model_params


@asynccontextmanager
async def open_text_stream(
    model: ChatCompletionsModel,
    messages: list[ModelMessage],
    settings: ModelSettings | None,
    params: ModelRequestParameters,
    record: Record | None,
) -> AsyncIterator[TextStream]:
    """The streamed answer to ``messages``, with ``settings`` and ``params`` as
    ``model.prepare_request`` gave them and ``fast_path`` took them (``chunk_client``)."""
    started = time.perf_counter()
    usage: RequestUsage | None = None
    wire: dict[str, Any] = dict(settings or {})
    model_params = params
    created = await model._completions_create(messages, True, wire, model_params)  # type: ignore[arg-type]
    if isinstance(created, ModelResponse):  # refused before the stream opened
        raise UnexpectedModelBehavior("the model refused the request before streaming")
    chunks = cast(AsyncStream[ChatCompletionChunk], created)
    profile = model.profile
    tags = profile.get("thinking_tags", DEFAULT_THINKING_TAGS)
    start_tag = tags[0] if tags else None
    custom = profile.get("openai_chat_thinking_field", None)
    strip_leading = bool(profile.get("ignore_streamed_leading_whitespace", False))
    restores = model._restores_special_tokens

    async def deltas() -> AsyncIterator[str]:
        nonlocal usage
        rest = aiter(chunks)
        seen: list[ChatCompletionChunk] = []
        text: list[str] = []
        last: ChatCompletionChunk | None = None
        raw_finish: str | None = None
        async for chunk in rest:
            seen.append(chunk)
            if not _plain(chunk, start_tag, custom, restores):
                async for delta in _handed_over(model, seen, rest, model_params, wire, text):
                    yield delta
                return
            last = chunk
            usage = _usage(chunk) or usage
            if not chunk.choices or chunk.choices[0].delta is None:
                continue
            raw_finish = chunk.choices[0].finish_reason or raw_finish
            content = chunk.choices[0].delta.content
            if not content or (strip_leading and not text and content.isspace()):
                continue
            text.append(content)
            yield content
        if last is None:
            raise UnexpectedModelBehavior("Streamed response ended without content or tool calls")
        stream.response = ModelResponse(
            parts=[TextPart("".join(text))] if text else [],
            usage=usage or RequestUsage(),
            model_name=last.model or model.model_name,
            provider_name=model.system,
            provider_response_id=last.id or None,
            finish_reason=_FINISH.get(raw_finish or ""),  # type: ignore[arg-type]
        )

    async def _handed_over(
        model: ChatCompletionsModel,
        seen: list[ChatCompletionChunk],
        rest: AsyncIterator[ChatCompletionChunk],
        params: ModelRequestParameters,
        wire: dict[str, Any],
        sent: list[str],
    ) -> AsyncIterator[str]:
        nonlocal usage
        streamed: StreamedResponse = await model._process_streamed_response(
            _Replay(seen, rest),  # type: ignore[arg-type]
            params,
            wire,  # type: ignore[arg-type]
        )
        if model._restores_special_tokens:
            # What pydantic-ai's model boundary attaches to every stream it opens.
            streamed._parts_manager.special_token_restorer = StreamRestorer()
        skip = len("".join(sent))
        async for event in streamed:
            if not plain_event(event):
                return
            delta = text_delta(event)
            if skip:
                taken = min(skip, len(delta))
                delta, skip = delta[taken:], skip - taken
            if delta:
                yield delta
        stream.response = streamed.get()
        usage = streamed.usage

    stream = TextStream(deltas())
    try:
        yield stream
    finally:
        await chunks.close()
        if record is not None:
            record(time.perf_counter() - started, usage)
