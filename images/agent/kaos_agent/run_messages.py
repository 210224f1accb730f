"""Reading a run's messages: the ones it added, its steps (the text of a stream event is
``kaos_agent.text_stream.text_delta``)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai.messages import ModelMessage, ModelRequest, UserPromptPart


def shorter(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    return min(a, b)


def new_messages(captured: Sequence[ModelMessage], prompt: str) -> list[ModelMessage]:
    """The messages this run added: from the last request that carries ``prompt``."""
    for i in range(len(captured) - 1, -1, -1):
        message = captured[i]
        if isinstance(message, ModelRequest) and any(
            isinstance(p, UserPromptPart) and p.content == prompt for p in message.parts
        ):
            return list(captured[i:])
    return list(captured)


def count_steps(messages: Sequence[ModelMessage]) -> int:
    return sum(1 for m in messages if not isinstance(m, ModelRequest))
