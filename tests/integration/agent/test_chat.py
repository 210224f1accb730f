"""The agent's OpenAI-compatible endpoint, spoken to by the official ``openai`` client."""

from __future__ import annotations

import aiohttp
import openai
import pytest

from tests.fixtures.agent import AgentFactory
from tests.support.devmodel import DevModel
from tests.support.procs import ServiceProcess


@pytest.fixture(scope="module")
def agent(module_agent_factory: AgentFactory) -> ServiceProcess:
    return module_agent_factory("chat", AGENT_INSTRUCTIONS="You are a test agent.")


def client(agent: ServiceProcess, **headers: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=agent.url + "/v1", api_key="unused", default_headers=headers)


async def test_plain_completion(agent: ServiceProcess, devmodel: DevModel) -> None:
    async with client(agent) as oa:
        answer = await oa.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "hello agent"}]
        )
    assert answer.choices[0].message.content == "Echo: hello agent"
    assert answer.choices[0].finish_reason == "stop"
    # The agent's instructions reached the model as the system message.
    sent = devmodel.requests()[-1]["messages"]
    assert sent[0]["role"] == "system" and "You are a test agent." in sent[0]["content"]


async def test_streaming_completion(agent: ServiceProcess) -> None:
    async with client(agent) as oa:
        stream = await oa.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "stream this"}], stream=True
        )
        parts = []
        finish = None
        async for chunk in stream:
            if chunk.choices:
                parts.append(chunk.choices[0].delta.content or "")
                finish = chunk.choices[0].finish_reason or finish
    assert "".join(parts) == "Echo: stream this"
    assert finish == "stop"


async def test_session_header_is_echoed_or_minted(agent: ServiceProcess) -> None:
    body = {"messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as http:
        async with http.post(
            agent.url + "/v1/chat/completions", json=body, headers={"X-Session-Id": "sess-1"}
        ) as resp:
            assert resp.status == 200
            assert resp.headers["X-Session-Id"] == "sess-1"
        async with http.post(agent.url + "/v1/chat/completions", json=body) as resp:
            assert resp.status == 200
            assert resp.headers["X-Session-Id"].startswith("s-")


async def test_client_history_is_used_without_memory(
    agent: ServiceProcess, devmodel: DevModel
) -> None:
    async with client(agent) as oa:
        await oa.chat.completions.create(
            model="chat",
            messages=[
                {"role": "user", "content": "my name is Ada"},
                {"role": "assistant", "content": "Hello Ada"},
                {"role": "user", "content": "what is my name?"},
            ],
        )
    contents = [m["content"] for m in devmodel.requests()[-1]["messages"]]
    assert "my name is Ada" in contents and "Hello Ada" in contents


@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        ({"messages": []}, {}, 400, "invalid_body"),
        ({}, {}, 400, "invalid_body"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, {}, 400, "invalid_body"),
        ({"messages": [{"role": "user", "content": ""}]}, {}, 400, "invalid_body"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, {}, 400, "invalid_body"),
        (
            {"messages": [{"role": "user", "content": "x"}]},
            {"X-Principal": "*"},
            400,
            "bad_identity_header",
        ),
        (
            {"messages": [{"role": "user", "content": "x"}]},
            {"X-KAOS-Delegation-Depth": "x"},
            400,
            "bad_delegation_depth",
        ),
    ],
)
async def test_bad_input_is_400_with_a_clear_error(
    agent: ServiceProcess, body: dict[str, object], headers: dict[str, str], status: int, code: str
) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(agent.url + "/v1/chat/completions", json=body, headers=headers) as resp,
    ):
        doc = await resp.json()
    assert resp.status == status
    assert doc["error"]["code"] == code and doc["error"]["message"]


async def test_malformed_json_is_400(agent: ServiceProcess) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            agent.url + "/v1/chat/completions",
            data=b"{not json",
            headers={"Content-Type": "application/json"},
        ) as resp,
    ):
        doc = await resp.json()
    assert resp.status == 400 and doc["error"]["code"] == "malformed_json"


async def test_model_outage_is_502_not_a_crash(agent: ServiceProcess, devmodel: DevModel) -> None:
    devmodel.set_faults(error_rate=1.0, status=500, routes=["chat"])
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            agent.url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "x"}]},
        ) as resp,
    ):
        doc = await resp.json()
    assert resp.status == 502 and doc["error"]["code"] == "model_unavailable"
    devmodel.set_faults()
    async with client(agent) as oa:
        answer = await oa.chat.completions.create(
            model="chat", messages=[{"role": "user", "content": "back?"}]
        )
    assert answer.choices[0].message.content == "Echo: back?"
