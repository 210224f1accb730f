"""Delegation: A2A first, chat completions as fallback, identity carried, depth bounded."""

from __future__ import annotations

from typing import Any

import aiohttp
import openai

from tests.fixtures.agent import AgentFactory
from tests.support.devmodel import DevModel
from tests.support.procs import ServiceProcess, free_port

DELEGATE_SCRIPT: list[dict[str, Any]] = [
    {
        "match": "ask b",
        "tool_call": {"name": "delegate_to_b", "arguments": {"message": "remember code 4711"}},
    },
    {"after_tool": "delegate_to_b", "reply": "B said: {result}"},
]


async def ask(agent: ServiceProcess, text: str, **headers: str) -> str:
    async with openai.AsyncOpenAI(
        base_url=agent.url + "/v1", api_key="x", default_headers=headers
    ) as oa:
        answer = await oa.chat.completions.create(
            model="a", messages=[{"role": "user", "content": text}]
        )
    return answer.choices[0].message.content or ""


async def metrics(agent: ServiceProcess) -> str:
    async with aiohttp.ClientSession() as http, http.get(agent.url + "/metrics") as resp:
        return await resp.text()


async def b_saw(b: ServiceProcess, devmodel: DevModel, *, session: str, principal: str) -> bool:
    """Whether B's window for (principal, session) holds the delegated message.

    B replays that window to the model on the next turn of the same session, so the
    model request the devmodel records shows what B stored under that identity.
    """
    await ask(b, "what was the code?", **{"X-Session-Id": session, "X-Principal": principal})
    messages = devmodel.requests()[-1]["messages"]
    return any(m["content"] == "remember code 4711" for m in messages)


async def test_delegation_over_a2a_carries_principal_and_session(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    b = agent_factory("b")
    a = agent_factory("a", AGENT_SUB_AGENTS=f"b:{b.url}")
    devmodel.set_script(DELEGATE_SCRIPT)
    answer = await ask(
        a,
        "please ask b",
        **{"X-Session-Id": "sess-9", "X-Principal": "alice", "X-Request-Id": "req-4711"},
    )
    assert answer == "B said: Echo: remember code 4711"
    assert 'kaos_agent_delegations_total{outcome="ok",peer="b",transport="a2a"} 1.0' in (
        await metrics(a)
    )
    assert 'kaos_agent_runs_total{entry="a2a",outcome="ok"} 1.0' in await metrics(b)
    # The task B created is alice's, in the caller's session, one delegation deep, for A's
    # request (what a run resumed from it reads back; no caller: agent tokens are off).
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            b.url + "/",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "ListTasks",
                "params": {"contextId": "sess-9"},
            },
            headers={"X-Principal": "alice"},
        ) as resp,
    ):
        tasks = (await resp.json())["result"]["tasks"]
    assert len(tasks) == 1
    assert tasks[0]["metadata"]["kaos"] == {
        "sessionId": "sess-9",
        "principal": "alice",
        "delegationDepth": 1,
        "requestId": "req-4711",
    }
    assert await b_saw(b, devmodel, session="sess-9", principal="alice")
    assert not await b_saw(b, devmodel, session="sess-9", principal="mallory")


async def test_fallback_to_chat_completions_when_peer_has_no_a2a(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    b = agent_factory("b", AGENT_A2A_ENABLED="false")
    a = agent_factory("a", AGENT_SUB_AGENTS=f"b:{b.url}")
    devmodel.set_script(DELEGATE_SCRIPT)
    answer = await ask(a, "please ask b", **{"X-Session-Id": "sess-7", "X-Principal": "bob"})
    assert answer == "B said: Echo: remember code 4711"
    assert 'kaos_agent_delegations_total{outcome="ok",peer="b",transport="chat"} 1.0' in (
        await metrics(a)
    )
    assert await b_saw(b, devmodel, session="sess-7", principal="bob")
    assert not await b_saw(b, devmodel, session="sess-8", principal="bob")


async def test_fallback_reaches_a_plain_openai_server(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    a = agent_factory("a", AGENT_SUB_AGENTS=f"b:{devmodel.url}")
    devmodel.set_script(DELEGATE_SCRIPT)
    assert await ask(a, "please ask b") == "B said: Echo: remember code 4711"


async def test_delegation_depth_is_bounded(agent_factory: AgentFactory, devmodel: DevModel) -> None:
    port = free_port()
    # An agent that is its own peer and whose model always delegates: without the bound
    # this would recurse until something broke.
    a = agent_factory(
        "a", port=port, AGENT_SUB_AGENTS=f"b:http://127.0.0.1:{port}", MAX_DELEGATION_DEPTH=2
    )
    devmodel.set_script(
        [
            {
                "match": "loop",
                "tool_call": {"name": "delegate_to_b", "arguments": {"message": "loop again"}},
            },
            {"after_tool": "*", "reply": "done: {result}"},
        ]
    )
    answer = await ask(a, "loop please")
    assert "delegation depth limit (2) reached" in answer
    text = await metrics(a)
    assert (
        'kaos_agent_delegations_total{outcome="depth_exceeded",peer="b",transport="none"} 1.0'
        in text
    )
    assert 'kaos_agent_delegations_total{outcome="ok",peer="b",transport="a2a"} 2.0' in text
