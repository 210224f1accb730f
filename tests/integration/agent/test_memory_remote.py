"""Remote memory against the real memory service, and memory tools the model cannot widen."""

from __future__ import annotations

import re
from typing import Any

import aiohttp
import pytest

from tests.fixtures.agent import AgentFactory
from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.support.devmodel import DevModel
from tests.support.memory_http import eventually, writes_settled
from tests.support.procs import ServiceProcess, free_port

IDENTITY = "kaos://agent/test/a"
FACT = "my favourite colour is teal"


def remote_env(memory_url: str, **extra: object) -> dict[str, object]:
    return {
        "MEMORY_TYPE": "remote",
        "MEMORY_ENDPOINT": memory_url,
        "AGENT_IDENTITY": IDENTITY,
        "MEMORY_MAX_READ_SCOPE": "agent",
        **extra,
    }


async def chat(agent: ServiceProcess, text: str, **headers: str) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            agent.url + "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": text}]},
            headers=headers,
        ) as resp,
    ):
        return resp.status, await resp.json()


async def ask(agent: ServiceProcess, text: str, **headers: str) -> str:
    status, doc = await chat(agent, text, **headers)
    assert status == 200, doc
    return str(doc["choices"][0]["message"]["content"])


async def metrics(url: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics") as resp:
        return await resp.text()


def metric(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(name)}(\{{.*\}})? ([0-9.e+-]+)$", line)
        if m and all(f'{k}="{v}"' in (m.group(1) or "") for k, v in labels.items()):
            total += float(m.group(2))
    return total


def agent_request(devmodel: DevModel, prompt: str) -> list[dict[str, Any]]:
    """Messages of the last model request the agent made for ``prompt``.

    The memory service uses the same devmodel (extraction, digests), so "the last
    request" alone may be one of its own.
    """
    for req in reversed(devmodel.requests()):
        last = req["messages"][-1]
        if last["role"] == "user" and last["content"] == prompt:
            return list(req["messages"])
    raise AssertionError(f"no model request for {prompt!r}")


async def wait_for_fact(memory: MemoryServer, session: str, principal: str) -> None:
    """Folding and extraction run in the background: poll the store until the fact is there."""
    async with memory.client(agent=IDENTITY) as client:
        await eventually(
            lambda: client.recall(
                "agent", "favourite colour", session_id=session, principal=principal
            ),
            lambda got: any(FACT in f.text for f in got.long_term.facts),
            what="the fact in long-term memory",
        )


async def test_turn_two_sees_turn_one(
    agent_factory: AgentFactory, memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    memory = memory_factory("local")
    agent = agent_factory("a", **remote_env(memory.url))
    who = {"X-Session-Id": "s1", "X-Principal": "alice"}
    await ask(agent, FACT, **who)
    await ask(agent, "what is my favourite colour?", **who)
    replayed = agent_request(devmodel, "what is my favourite colour?")
    assert [m["content"] for m in replayed if m["role"] in ("user", "assistant")] == [
        FACT,
        f"Echo: {FACT}",
        "what is my favourite colour?",
    ]
    # Another principal in the same session id sees nothing of alice's window.
    await ask(agent, "and mine?", **{"X-Session-Id": "s1", "X-Principal": "mallory"})
    assert not any(FACT in m["content"] for m in agent_request(devmodel, "and mine?"))


async def test_a_session_id_used_first_by_another_principal_is_still_alices(
    agent_factory: AgentFactory, memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    """Session ids are the client's choice: mallory chatting first under the id alice will
    use neither takes it from her nor sees what she says there (through the agent)."""
    memory = memory_factory("local")
    agent = agent_factory("a", **remote_env(memory.url))
    mallory = {"X-Session-Id": "alice-1", "X-Principal": "mallory"}
    alice = {"X-Session-Id": "alice-1", "X-Principal": "alice"}
    await ask(agent, "mallory was here", **mallory)
    await ask(agent, FACT, **alice)
    await ask(agent, "what is my favourite colour?", **alice)
    replayed = agent_request(devmodel, "what is my favourite colour?")
    assert [m["content"] for m in replayed if m["role"] in ("user", "assistant")] == [
        FACT,
        f"Echo: {FACT}",
        "what is my favourite colour?",
    ]
    await ask(agent, "and mine?", **mallory)
    assert [m["content"] for m in agent_request(devmodel, "and mine?") if m["role"] == "user"] == [
        "mallory was here",
        "and mine?",
    ]


async def test_new_session_sees_facts_but_not_the_old_window(
    agent_factory: AgentFactory, memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    # A tiny budget folds the first turns at once, so extraction runs right away.
    memory = memory_factory("local", token_budget=16)
    agent = agent_factory("a", **remote_env(memory.url))
    await ask(agent, FACT, **{"X-Session-Id": "old", "X-Principal": "alice"})
    await wait_for_fact(memory, "old", "alice")
    await ask(
        agent, "what do you know about me?", **{"X-Session-Id": "new", "X-Principal": "alice"}
    )
    sent = agent_request(devmodel, "what do you know about me?")
    system = " ".join(m["content"] for m in sent if m["role"] == "system")
    assert FACT in system  # long-term facts in the instructions
    conversation = [m["content"] for m in sent if m["role"] != "system"]
    assert conversation == ["what do you know about me?"]  # no window from "old"


async def test_memory_down_degrades_and_is_counted(agent_factory: AgentFactory) -> None:
    agent = agent_factory("a", **remote_env(f"http://127.0.0.1:{free_port()}"))
    assert await ask(agent, "still alive?", **{"X-Session-Id": "s"}) == "Echo: still alive?"
    text = await metrics(agent.url)
    assert metric(text, "kaos_agent_memory_degraded_total", operation="recall") == 1
    assert metric(text, "kaos_agent_memory_degraded_total", operation="write") == 1


async def test_strict_mode_surfaces_the_write_failure(agent_factory: AgentFactory) -> None:
    agent = agent_factory(
        "a", **remote_env(f"http://127.0.0.1:{free_port()}", MEMORY_FAILURE_MODE="strict")
    )
    status, doc = await chat(agent, "remember this", **{"X-Session-Id": "s"})
    assert status == 500
    assert doc["error"]["code"] == "memory_write_failed"
    assert "strict" in doc["error"]["message"]


SPOOFS = {
    "spoof-level": {"name": "search_memory", "arguments": {"query": "colour", "level": "user"}},
    "spoof-store": {"name": "search_memory", "arguments": {"query": "colour", "level": "store"}},
    "spoof-principal": {
        "name": "search_memory",
        "arguments": {"query": "colour", "principal": "mallory"},
    },
    "spoof-agent": {
        "name": "save_memory",
        "arguments": {"content": "x", "agent_id": "kaos://agent/other/b"},
    },
    "spoof-session": {
        "name": "search_memory",
        "arguments": {"query": "colour", "level": "session", "session_id": "other"},
    },
}


@pytest.fixture
def tools_agent(
    agent_factory: AgentFactory, memory_factory: MakeMemory
) -> tuple[ServiceProcess, MemoryServer]:
    memory = memory_factory("local")
    agent = agent_factory("a", **remote_env(memory.url, MEMORY_TOOLS="true"))
    return agent, memory


async def test_memory_tools_offered_to_the_model(
    tools_agent: tuple[ServiceProcess, MemoryServer], devmodel: DevModel
) -> None:
    agent, _ = tools_agent
    await ask(agent, "hello", **{"X-Session-Id": "s"})
    assert {"search_memory", "save_memory"} <= set(agent_request_tools(devmodel, "hello"))


def agent_request_tools(devmodel: DevModel, prompt: str) -> list[str]:
    for req in reversed(devmodel.requests()):
        if req["messages"][-1]["content"] == prompt:
            return list(req.get("tools") or [])
    raise AssertionError(f"no model request for {prompt!r}")


@pytest.mark.parametrize("spoof", sorted(SPOOFS))
async def test_spoofed_scope_is_refused_before_the_store(
    tools_agent: tuple[ServiceProcess, MemoryServer], devmodel: DevModel, spoof: str
) -> None:
    agent, memory = tools_agent
    devmodel.set_script(
        [
            {"match": spoof, "tool_call": SPOOFS[spoof]},
            {"after_tool": "*", "reply": "Tool said: {result}"},
        ]
    )
    before = await metrics(memory.url)
    answer = await ask(agent, f"please {spoof}", **{"X-Session-Id": "s", "X-Principal": "alice"})
    await writes_settled(agent.url)
    after = await metrics(memory.url)
    assert answer.startswith("Tool said:")
    assert "not allowed" in answer or "does not take" in answer
    requests = "kaos_memory_http_requests_total"
    # Exactly the run's own recall and write reached the store; nothing from the tool.
    assert (
        metric(after, requests, route="/v1/recall") - metric(before, requests, route="/v1/recall")
        == 1
    )
    assert (
        metric(after, requests, route="/v1/write") - metric(before, requests, route="/v1/write")
        == 1
    )
    assert metric(after, requests, status="403") == metric(before, requests, status="403") == 0
    assert metric(after, requests, status="400") == metric(before, requests, status="400") == 0
    assert metric(await metrics(agent.url), "kaos_agent_memory_tool_refused_total") == 1


async def test_entitled_search_and_save_work(
    tools_agent: tuple[ServiceProcess, MemoryServer], devmodel: DevModel
) -> None:
    agent, _ = tools_agent
    devmodel.set_script(
        [
            {
                "match": "save it",
                "tool_call": {"name": "save_memory", "arguments": {"content": FACT}},
            },
            {
                "match": "look it up",
                "tool_call": {
                    "name": "search_memory",
                    "arguments": {"query": "colour", "level": "agent"},
                },
            },
            {"after_tool": "*", "reply": "Tool said: {result}"},
        ]
    )
    who = {"X-Session-Id": "s", "X-Principal": "alice"}
    assert await ask(agent, "save it", **who) == "Tool said: Saved."
    assert (await ask(agent, "look it up", **who)).startswith("Tool said:")


LISBON = "Alice lives in Lisbon."
PORTO = "Alice moved to Porto."


async def test_search_memory_as_of_finds_what_was_true_then(
    agent_factory: AgentFactory, memory_factory: MakeMemory, devmodel: DevModel
) -> None:
    """The model asks memory about the past: a fact a later one replaced is found as of a
    time before the change and not now; a time that is not one is refused before the store."""
    memory = memory_factory("local", idle_flush_seconds=1, sweep_interval=0.2)
    agent = agent_factory("a", **remote_env(memory.url, MEMORY_TOOLS="true"))
    who = {"X-Session-Id": "s", "X-Principal": "alice"}

    async def saved(text: str) -> str:
        """Save ``text`` through the model's tool call; when it became true."""
        devmodel.set_script(
            [
                {"match": "save", "tool_call": {"name": "save_memory",
                                                "arguments": {"content": text}}},
                {"after_tool": "*", "reply": "Tool said: {result}"},
            ]
        )  # fmt: skip
        assert await ask(agent, "save", **who) == "Tool said: Saved."
        async with memory.client() as admin:
            listed = await eventually(
                lambda: admin.list("store", include=["long_term"], history=True),
                lambda got: any(f.text == text for f in got.long_term.facts),
                what=f"{text!r} in long-term memory",
            )
        found = next(f for f in listed.long_term.facts if f.text == text)
        assert found.valid_from is not None
        return found.valid_from

    between = await saved(LISBON)
    await saved(PORTO)

    def search(**extra: str) -> list[dict[str, Any]]:
        arguments = {"query": "Where does Alice live? Lisbon or Porto", "level": "agent", **extra}
        return [
            {"match": "look", "tool_call": {"name": "search_memory", "arguments": arguments}},
            {"after_tool": "*", "reply": "Tool said: {result}"},
        ]

    devmodel.set_script(search(as_of=between))
    then = await ask(agent, "look back", **who)
    assert LISBON in then and PORTO not in then, then
    devmodel.set_script(search())
    now = await ask(agent, "look now", **who)
    assert PORTO in now and LISBON not in now, now
    devmodel.set_script(search(as_of="last spring"))
    refused = await ask(agent, "look wrong", **who)
    assert "'as_of' must be an ISO 8601 time" in refused, refused
