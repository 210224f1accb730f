"""``POST /v1/chat/completions``: the agent behind the OpenAI Chat Completions shape.

The last message must be the user's; it is the run's input. Earlier messages are the
caller's own history and are replayed only when memory holds nothing for the session
(see ``kaos_agent.runner``). The session comes from ``X-Session-Id`` (a fresh one is
minted and returned in the same header when absent), the principal from ``X-Principal``,
the delegation depth from ``X-KAOS-Delegation-Depth``. ``stream: true`` answers
``chat.completion.chunk`` server-sent events ending with ``data: [DONE]``. ``usage`` is
the tokens the model reported, summed over the run's model requests; a stream carries it
in a last chunk when the request asks with ``stream_options.include_usage``.

With agent identity verified (``kaos_agent.auth``), a delegating agent's token is checked
before the body is read; a refusal is raised, and the error middleware answers it (401
with the challenge the refusal carries, 403).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from aiohttp import web
from kaos_core.errors import BadRequest, KaosError
from kaos_core.http.body import parse_model, read_json_object
from kaos_core.http.middleware import error_body, request_id
from kaos_core.memory.contract import Role
from kaos_core.wire import SESSION_HEADER
from pydantic import BaseModel, ConfigDict, Field

from kaos_agent.auth import EdgeAuth
from kaos_agent.context import RunDeps, Verified, run_context
from kaos_agent.memory.turns import history_from_request
from kaos_agent.runner import AgentRuntime, StreamState, TokenUsage

log = logging.getLogger(__name__)


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    # OpenAI clients send many optional fields (temperature, tools, …): accepted, unused.
    model_config = ConfigDict(extra="allow")
    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


def _text(message: ChatMessage) -> str:
    if message.content is None:
        return ""
    if isinstance(message.content, str):
        return message.content
    return "\n".join(p.text for p in message.content if p.type == "text" and p.text)


_ROLE_MAP: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}


def _completion_id() -> str:
    return "chatcmpl-" + uuid.uuid4().hex


def _usage(usage: TokenUsage) -> dict[str, int]:
    """OpenAI's ``usage``: the tokens the model reported, summed over the run's requests."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    }


async def chat_completions(
    request: web.Request, runtime: AgentRuntime, model_name: str, auth: EdgeAuth | None = None
) -> web.StreamResponse:
    verified: Verified | None = None
    if auth is not None:
        verified = await auth.check(request.headers)
    doc = await read_json_object(request)
    body = parse_model(ChatRequest, doc)
    last = body.messages[-1]
    prompt = _text(last)
    if last.role != "user" or not prompt.strip():
        raise BadRequest(
            "the last message must be a user message with text content", code="invalid_body"
        )
    earlier = [(_ROLE_MAP[m.role], _text(m)) for m in body.messages[:-1] if _text(m).strip()]
    history = history_from_request(earlier)
    deps = run_context(request.headers, request_id=request_id(request), verified=verified)
    model = body.model or model_name
    headers = {SESSION_HEADER: deps.session_id}
    if body.stream:
        return await _stream(
            request, runtime, prompt, deps, history, model, headers, usage=body.include_usage
        )
    outcome = await runtime.run(prompt, deps, entry="chat", client_history=history)
    answer = {
        "id": _completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": outcome.text},
                "finish_reason": outcome.finish_reason,
            }
        ],
        "usage": _usage(outcome.usage),
    }
    return web.json_response(answer, headers=headers)


class _EventStream(web.StreamResponse):
    """A streamed answer whose headers leave with its first chunk, in one write (a
    ``StreamResponse`` sends them at ``prepare``, a packet ahead of the first token, as
    aiohttp's ``Response`` does not)."""

    _send_headers_immediately = False


@dataclass(frozen=True)
class _Chunks:
    """The chunks of one streamed answer. With ``stream_options.include_usage`` every chunk
    carries ``usage: null`` and a last chunk without choices carries the usage, as OpenAI's."""

    id: str
    created: int
    model: str
    usage: bool

    def _event(self, choices: list[dict[str, Any]], usage: TokenUsage | None) -> bytes:
        doc: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if self.usage:
            doc["usage"] = None if usage is None else _usage(usage)
        return f"data: {json.dumps(doc, ensure_ascii=False)}\n\n".encode()

    def delta(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        return self._event([{"index": 0, "delta": delta, "finish_reason": finish}], None)

    def final_usage(self, usage: TokenUsage) -> bytes:
        return self._event([], usage)


async def _stream(
    request: web.Request,
    runtime: AgentRuntime,
    prompt: str,
    deps: RunDeps,
    history: list[Any],
    model: str,
    headers: dict[str, str],
    *,
    usage: bool,
) -> web.StreamResponse:
    chunks = _Chunks(_completion_id(), int(time.time()), model, usage)
    state = StreamState()
    # aclosing: a client that goes away mid-answer must not leave the run hanging.
    async with contextlib.aclosing(
        runtime.stream(prompt, deps, entry="chat", client_history=history, state=state)
    ) as deltas:
        # The first delta is awaited before the response starts, so failures that happen
        # before any text (model down) still get a proper HTTP status.
        try:
            first: str | None = await anext(deltas)
        except StopAsyncIteration:
            first = None
        response = _EventStream(
            headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        # The role chunk and the first text leave in one write: the first token is not
        # held behind a packet of its own.
        head = chunks.delta({"role": "assistant", "content": ""})
        await response.write(head if first is None else head + chunks.delta({"content": first}))
        failed = False
        try:
            if first is not None:
                async for delta in deltas:
                    await response.write(chunks.delta({"content": delta}))
        except KaosError as exc:
            # Too late for a status code: an error event in the stream, as OpenAI does.
            err = error_body(exc.code, exc.message, request_id(request))
            await response.write(f"data: {json.dumps(err)}\n\n".encode())
            failed = True
        if not failed:
            await response.write(chunks.delta({}, state.finish_reason))
            if usage:
                await response.write(chunks.final_usage(state.usage))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response
