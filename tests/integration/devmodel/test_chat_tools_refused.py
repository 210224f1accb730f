"""A development model that cannot call tools, as Ollama serves SmolLM2-135M, and what the
development model records of each chat request (usage reported, sampling sent)."""

from __future__ import annotations

import openai
import pytest
from openai import OpenAI
from openai.types.chat import ChatCompletionFunctionToolParam

from tests.support.devmodel import DevModel

TOOL: ChatCompletionFunctionToolParam = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


@pytest.fixture
def client(devmodel: DevModel) -> OpenAI:
    return OpenAI(base_url=devmodel.base_url, api_key="x", max_retries=0, timeout=30)


def test_a_no_tools_model_refuses_tools_as_ollama_does(client: OpenAI, devmodel: DevModel) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(
            model="devmodel-notools", messages=[{"role": "user", "content": "hi"}], tools=[TOOL]
        )
    assert err.value.status_code == 400
    assert "devmodel-notools does not support tools" in err.value.message
    # Without tools it answers; other models take tools.
    plain = client.chat.completions.create(
        model="devmodel-notools", messages=[{"role": "user", "content": "hi"}]
    )
    assert plain.choices[0].message.content == "Echo: hi"
    client.chat.completions.create(
        model="devmodel", messages=[{"role": "user", "content": "hi"}], tools=[TOOL]
    )
    assert [(r["kind"], r["model"]) for r in devmodel.requests()] == [
        ("tools_refused", "devmodel-notools"),
        ("echo", "devmodel-notools"),
        ("echo", "devmodel"),
    ]
    assert devmodel.stats()["tools_refused"] == 1


def test_each_request_records_its_usage_and_sampling(client: OpenAI, devmodel: DevModel) -> None:
    answer = client.chat.completions.create(
        model="devmodel",
        messages=[{"role": "user", "content": "two words"}],
        temperature=0,
        top_p=0.9,
        max_tokens=12,
        seed=3,
    )
    (sent,) = devmodel.requests()
    assert answer.usage is not None
    assert sent["usage"] == answer.usage.model_dump(
        include={"prompt_tokens", "completion_tokens", "total_tokens"}
    )
    assert sent["usage"]["prompt_tokens"] == 2
    assert sent["sampling"] == {"temperature": 0, "top_p": 0.9, "max_tokens": 12, "seed": 3}
    assert sent["stream_usage"] is False
