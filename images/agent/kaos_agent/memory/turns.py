"""Between pydantic-ai messages and memory turns, in both directions.

A run's new messages become plain-text turns for the store: the user's message, each tool
call and its result (delegations are tool calls too), and the model's text. Stored turns
come back as message history: user turns as user prompts, assistant and tool turns as
model text, system turns (and the session digest) as system prompts, in order.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from kaos_core.memory.contract import Role, Turn
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

# Tool results are kept whole up to this size; the store caps a turn at 256 KiB.
MAX_TOOL_TEXT = 16 * 1024
DIGEST_PREFIX = "Summary of the earlier conversation in this session:\n"


def _clip(text: str, limit: int = MAX_TOOL_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + " …[truncated]"


def _user_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return "\n".join(c for c in part.content if isinstance(c, str))


def _tool_result_text(part: ToolReturnPart) -> str:
    content = part.content
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(content)


def turns_from_messages(messages: Iterable[ModelMessage]) -> list[Turn]:
    """The turns of a run, tool calls and their results kept as text."""
    turns: list[Turn] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for rpart in message.parts:
                if isinstance(rpart, UserPromptPart):
                    text = _user_text(rpart)
                    if text:
                        turns.append(Turn(role="user", content=_clip(text, 200_000)))
                elif isinstance(rpart, ToolReturnPart):
                    turns.append(
                        Turn(
                            role="tool",
                            content=_clip(
                                f"{rpart.tool_name} returned: {_tool_result_text(rpart)}"
                            ),
                        )
                    )
                elif isinstance(rpart, RetryPromptPart) and rpart.tool_name:
                    detail = (
                        rpart.content if isinstance(rpart.content, str) else "invalid arguments"
                    )
                    turns.append(
                        Turn(role="tool", content=_clip(f"{rpart.tool_name} failed: {detail}"))
                    )
        elif isinstance(message, ModelResponse):
            for spart in message.parts:
                if isinstance(spart, TextPart) and spart.content:
                    turns.append(Turn(role="assistant", content=_clip(spart.content, 200_000)))
                elif isinstance(spart, ToolCallPart):
                    turns.append(
                        Turn(
                            role="tool",
                            content=_clip(f"call {spart.tool_name}({spart.args_as_json_str()})"),
                        )
                    )
    return turns


def messages_from_turns(
    turns: Sequence[tuple[str, str]], *, digest: str | None = None
) -> list[ModelMessage]:
    """Message history replaying ``(role, content)`` turns, the digest first."""
    messages: list[ModelMessage] = []
    request_parts: list[ModelRequestPart] = []
    response_parts: list[ModelResponsePart] = []

    def flush_request() -> None:
        if request_parts:
            messages.append(ModelRequest(parts=list(request_parts)))
            request_parts.clear()

    def flush_response() -> None:
        if response_parts:
            messages.append(ModelResponse(parts=list(response_parts)))
            response_parts.clear()

    if digest:
        request_parts.append(SystemPromptPart(DIGEST_PREFIX + digest))
    for role, content in turns:
        if role in ("assistant", "tool"):
            flush_request()
            response_parts.append(TextPart(content))
        else:
            flush_response()
            if role == "system":
                request_parts.append(SystemPromptPart(content))
            else:
                request_parts.append(UserPromptPart(content))
    flush_request()
    flush_response()
    return messages


def history_from_request(messages: Sequence[tuple[Role, str]]) -> list[ModelMessage]:
    """Message history from the earlier messages of an OpenAI-style request."""
    return messages_from_turns(messages)
