"""The loop's model: pydantic-ai's OpenAI Chat Completions model, sent over aiohttp.

pydantic-ai's ``OpenAIChatModel`` maps the run's messages and tools to the Chat
Completions shape and maps the answer back; KAOS keeps both. What it replaces is the
transport: the OpenAI SDK re-validates every request body against its typed
dictionaries, recursively, message by message, and sends it through an httpx client, and
that was most of what an agent turn cost beyond the model itself, growing with the
conversation (docs/benchmarks.md, "agent runtime"). Here the mapped body goes out as JSON
on the agent's aiohttp session, and the answer is built into the SDK's own response
types the way the SDK builds them (``construct``, no validation: pydantic-ai validates
leniently afterwards), so the rest of pydantic-ai sees exactly what it saw before.

What the SDK did around the request is kept: the bearer key, the model settings KAOS sets
(timeout, sampling), ``stream_options.include_usage`` for streams, two retries with
backoff on a connection failure or a retryable status (408, 409, 429, 5xx; ``Retry-After``
honoured), an error status as ``ModelHTTPError`` with the provider's error object as its
body, and an error sent inside a stream as an error, not as text. A request using
anything else (structured output, provider-specific settings) goes through the SDK as
before: correctness first, the fast path for what agents send.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar, cast

import aiohttp
from openai import AsyncStream
from openai.types import chat
from openai.types.chat import ChatCompletionChunk
from openai.types.completion_usage import CompletionUsage
from pydantic import ValidationError
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelConnectionError,
    ModelHTTPError,
    ModelTimeoutError,
    UnexpectedModelBehavior,
)
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIChatModelSettings
from pydantic_ai.profiles import ModelProfileSpec
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RequestUsage

# The model settings the fast path sends, by the Chat Completions field they become; a
# request with any other setting goes through the SDK.
_BODY_FIELDS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "max_tokens": "max_tokens",
    "seed": "seed",
    "stop_sequences": "stop",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
    "logit_bias": "logit_bias",
    "parallel_tool_calls": "parallel_tool_calls",
}
_HANDLED_SETTINGS = frozenset({*_BODY_FIELDS, "timeout"})
_TEXT_OUTPUT_MODES = frozenset({"text", "tool", "auto"})

# As the OpenAI SDK: two retries, exponential backoff from half a second, with jitter.
MAX_RETRIES = 2
_RETRYABLE = frozenset({408, 409, 429})
_MAX_RETRY_AFTER = 60.0
# A connection to a model in reach opens in milliseconds. One that has not opened in this
# long is going nowhere (on the test cluster, the first connection to a Hosted model's
# replaced pod sometimes never opened): it is given up and retried on a new connection,
# rather than waited on for the whole model timeout.
CONNECT_TIMEOUT = 10.0

Sleep = Callable[[float], Any]
_Built = TypeVar("_Built", chat.ChatCompletion, ChatCompletionChunk)


# The answer's usage fields that are totals, not details.
_USAGE_TOTALS = frozenset({"prompt_tokens", "completion_tokens", "total_tokens"})


def chat_usage(usage: CompletionUsage) -> RequestUsage:
    """The usage a Chat Completions answer (or a stream's last chunk) reports, read from
    its fields as pydantic-ai maps them: the prompt's tokens in, the completion's out, the
    cached prompt tokens, audio and reasoning tokens, and the other counts as details.
    (pydantic-ai maps it through genai-prices' extractor of the provider, made to price a
    call: a large share of an agent turn's CPU, for the same figures.)"""
    extra = usage.model_extra or {}
    details = {k: v for k, v in extra.items() if isinstance(v, int) and k not in _USAGE_TOTALS}
    cache_read = audio_in = audio_out = reasoning = 0
    if (prompt := usage.prompt_tokens_details) is not None:
        cache_read = prompt.cached_tokens or 0
        audio_in = prompt.audio_tokens or 0
    if (completion := usage.completion_tokens_details) is not None:
        counts = completion.model_dump(exclude_none=True).items()
        details.update((k, v) for k, v in counts if isinstance(v, int))
        audio_out = completion.audio_tokens or 0
        reasoning = completion.reasoning_tokens or 0
    return RequestUsage(
        input_tokens=usage.prompt_tokens or 0,
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cache_read,
        input_audio_tokens=audio_in,
        output_audio_tokens=audio_out,
        output_reasoning_tokens=reasoning,
        details=details,
    )


class ChatCompletionsModel(OpenAIChatModel):
    """An OpenAI-compatible Chat Completions model sent over ``http`` (an aiohttp session
    the caller owns and closes)."""

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str,
        api_key: str,
        http: aiohttp.ClientSession,
        profile: ModelProfileSpec | None = None,
        sleep: Sleep = asyncio.sleep,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        super().__init__(
            model_name, provider=OpenAIProvider(base_url=base_url, api_key=api_key), profile=profile
        )
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self._http = http
        self._sleep = sleep
        self._connect_timeout = connect_timeout

    async def _completions_create(  # type: ignore[override]
        self,
        messages: list[ModelMessage],
        stream: bool,
        model_settings: OpenAIChatModelSettings,
        model_request_parameters: ModelRequestParameters,
    ) -> chat.ChatCompletion | AsyncStream[ChatCompletionChunk] | ModelResponse:
        if not fast_path(model_settings, model_request_parameters):
            return await super()._completions_create(  # type: ignore[call-overload,no-any-return]
                messages, stream, model_settings, model_request_parameters
            )
        tools, tool_choice = self._get_tool_choice(model_settings, model_request_parameters)
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": await self._map_messages(
                messages, model_request_parameters, model_settings=model_settings
            ),
            "stream": stream,
        }
        if stream:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = tools
            if tool_choice:
                body["tool_choice"] = tool_choice
        settings = cast(dict[str, Any], model_settings)
        for key, field in _BODY_FIELDS.items():
            if settings.get(key) is not None and (key != "parallel_tool_calls" or tools):
                body[field] = settings[key]
        timeout = settings.get("timeout")
        response = await self._send(json.dumps(body).encode(), timeout)
        if stream:
            return cast(AsyncStream[ChatCompletionChunk], _ChunkStream(response, self.model_name))
        async with response:
            data = await _json(response, self.model_name)
        return _built(chat.ChatCompletion, data)

    def _map_usage(self, response: chat.ChatCompletion) -> RequestUsage:
        if response.usage is None:
            return super()._map_usage(response)
        return chat_usage(response.usage)

    async def _send(self, body: bytes, read_timeout: float | None) -> aiohttp.ClientResponse:
        """The model's answer to ``body`` with a success status, retried as the SDK does."""
        # As httpx's timeout: between two reads (a stream may take long); to connect, at
        # most the connect bound.
        connect = min(self._connect_timeout, read_timeout or self._connect_timeout)
        limits = aiohttp.ClientTimeout(total=None, sock_connect=connect, sock_read=read_timeout)
        for attempt in range(MAX_RETRIES + 1):
            last = attempt == MAX_RETRIES
            try:
                response = await self._http.post(
                    self._url, data=body, headers=self._headers, timeout=limits
                )
            except (aiohttp.ClientError, TimeoutError) as exc:
                if last:
                    raise _connection_error(exc, self.model_name) from exc
                await self._sleep(_backoff(attempt, None))
                continue
            if response.status < 400:
                return response
            async with response:
                error = await _error(response, self.model_name)
            if last or not _retryable(response):
                raise error
            await self._sleep(_backoff(attempt, response.headers.get("Retry-After")))
        raise AssertionError("unreachable")  # pragma: no cover


def _built(model: type[_Built], data: dict[str, Any]) -> _Built:
    """``data`` as the SDK's ``model``: validated when it fits (pydantic's core is much
    faster than the SDK's recursive construction), else built as the SDK builds it, with
    no validation, so a provider's lenient answer (a null it should not send) reaches
    pydantic-ai as it did through the SDK."""
    try:
        return model.model_validate(data)
    except ValidationError:
        return model.construct(**data)


def fast_path(settings: OpenAIChatModelSettings, params: ModelRequestParameters) -> bool:
    """Whether the request goes out here (else through the OpenAI SDK): only the settings
    KAOS sets, and a text or tool output."""
    return set(settings) <= _HANDLED_SETTINGS and params.output_mode in _TEXT_OUTPUT_MODES


def _retryable(response: aiohttp.ClientResponse) -> bool:
    should = response.headers.get("x-should-retry")
    if should in ("true", "false"):
        return should == "true"
    return response.status in _RETRYABLE or response.status >= 500


def _backoff(attempt: int, retry_after: str | None) -> float:
    if retry_after is not None:
        try:
            seconds = float(retry_after)
        except ValueError:
            seconds = -1.0
        if 0 <= seconds <= _MAX_RETRY_AFTER:
            return seconds
    return min(0.5 * 2.0**attempt, 8.0) * (1 - 0.25 * random.random())


_NOT_JSON = "Invalid response from openai chat completions endpoint, expected JSON data"


def _connection_error(exc: BaseException, model_name: str) -> ModelConnectionError:
    if isinstance(exc, TimeoutError):
        return ModelTimeoutError(model_name, "Request timed out.")
    return ModelConnectionError(model_name, "Connection error.")


async def _json(response: aiohttp.ClientResponse, model_name: str) -> dict[str, Any]:
    try:
        raw = await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _connection_error(exc, model_name) from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise UnexpectedModelBehavior(_NOT_JSON) from exc
    if not isinstance(data, dict):
        raise UnexpectedModelBehavior(_NOT_JSON)
    return data


async def _error(response: aiohttp.ClientResponse, model_name: str) -> ModelHTTPError:
    """The error an error status is: the provider's error object as the body, as the SDK
    gives it (the ``error`` member of an OpenAI error document, else the whole body)."""
    try:
        raw = await response.read()
    except (aiohttp.ClientError, TimeoutError):
        raw = b""
    text = raw.decode(errors="replace")
    body: object = text or None
    with contextlib.suppress(ValueError):
        body = json.loads(raw) if raw else None
    if isinstance(body, dict) and "error" in body and isinstance(body["error"], dict):
        body = body["error"]
    return ModelHTTPError(response.status, model_name, body, headers=dict(response.headers.items()))


class _ChunkStream:
    """The chunks of a streamed answer, read from its server-sent events: what the SDK's
    ``AsyncStream`` gives pydantic-ai (iteration, and a context that closes the response)."""

    def __init__(self, response: aiohttp.ClientResponse, model_name: str) -> None:
        self._response = response
        self._model_name = model_name

    async def __aenter__(self) -> _ChunkStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._response.release()

    async def close(self) -> None:
        self._response.release()

    def __aiter__(self) -> AsyncIterator[ChatCompletionChunk]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[ChatCompletionChunk]:
        try:
            async for line in self._response.content:
                if not line.startswith(b"data:"):
                    continue  # blank separators, comments, event names
                data = line[5:].strip()
                if data == b"[DONE]":
                    return
                doc = json.loads(data)
                if isinstance(doc, dict) and doc.get("error") is not None:
                    raise _stream_error(doc["error"], self._model_name)
                yield _built(ChatCompletionChunk, doc)
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise _connection_error(exc, self._model_name) from exc
        except ValueError as exc:
            raise UnexpectedModelBehavior(
                "Invalid chunk from openai chat completions endpoint, expected JSON data"
            ) from exc


def _stream_error(error: object, model_name: str) -> ModelAPIError:
    """An error object sent inside a stream that had already answered 200."""
    message = error.get("message") if isinstance(error, dict) else error
    return ModelAPIError(
        model_name, str(message or "the model sent an error in its stream"), body=error
    )
