"""The agent reads a Chat Completions answer's usage itself (``kaos_agent.model_client.
chat_usage``) instead of through pydantic-ai's genai-prices mapping: the figures must be
the ones pydantic-ai's own mapping gives, for every shape of usage an OpenAI-compatible
server sends, so a pydantic-ai upgrade that changes its mapping fails here."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_agent.model_client import chat_usage
from openai.types import chat
from openai.types.completion_usage import CompletionUsage
from pydantic_ai.models.openai._response_fields import map_usage

USAGES: list[dict[str, Any]] = [
    {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    {
        "prompt_tokens": 100,
        "completion_tokens": 50,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 40, "audio_tokens": 3},
        "completion_tokens_details": {
            "reasoning_tokens": 7,
            "audio_tokens": 2,
            "accepted_prediction_tokens": 1,
            "rejected_prediction_tokens": 0,
        },
    },
    # A provider's own counts beside the standard ones (Groq's, vLLM's): details.
    {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15, "queue_time": 3},
    {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": None},
        "completion_tokens_details": None,
    },
]


@pytest.mark.parametrize("usage", USAGES)
def test_usage_is_read_as_pydantic_ai_maps_it(usage: dict[str, Any]) -> None:
    answer = chat.ChatCompletion.model_construct(
        id="c", model="devmodel", object="chat.completion", created=0, choices=[],
        usage=CompletionUsage.model_validate(usage),
    )  # fmt: skip
    assert answer.usage is not None
    ours = chat_usage(answer.usage)
    assert ours == map_usage(answer, "openai", "http://model.invalid/v1", "devmodel")
    assert ours.input_tokens == usage["prompt_tokens"]
    assert ours.output_tokens == usage["completion_tokens"]
