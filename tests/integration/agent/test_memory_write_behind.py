"""A soft-mode turn's memory write leaves the answer's path, and nothing is lost for it.

The agent and a real memory service are served in this event loop; the memory service can
hold writes at its door (``RecordingMemory.release``), which makes "the answer came before
the write finished" and "the next turn waited for the write" things a test can see.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from kaos_core.memory.client import MemoryServiceClient

from tests.fixtures.agent import RecordingMemory, agent_env, recording_memory, serve_agent
from tests.support.devmodel import DevModel
from tests.support.memory_http import eventually
from tests.support.procs import free_port

FACT = "my locker code is 4711"
WHO = {"X-Session-Id": "s1", "X-Principal": "alice"}
IDENTITY = "kaos://agent/test/a"


def remote(memory: RecordingMemory, **extra: str) -> dict[str, str]:
    return {
        "MEMORY_TYPE": "remote",
        "MEMORY_ENDPOINT": memory.url,
        "AGENT_IDENTITY": IDENTITY,
        "MEMORY_MAX_READ_SCOPE": "agent",
        "MEMORY_WRITE_AFTER_ANSWER": "true",
        **extra,
    }


async def chat(http: aiohttp.ClientSession, port: int, text: str) -> str:
    async with http.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json={"model": "a", "messages": [{"role": "user", "content": text}]},
        headers=WHO,
    ) as resp:
        assert resp.status == 200, await resp.text()
        doc = await resp.json()
    return str(doc["choices"][0]["message"]["content"])


async def window(memory: RecordingMemory) -> list[str]:
    async with MemoryServiceClient(memory.url, agent_identity=IDENTITY) as client:
        got = await client.list("session", session_id="s1", principal="alice")
    return [t.content for t in got.short_term.window]


async def test_the_answer_does_not_wait_for_the_write_and_the_next_turn_does(
    tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with recording_memory(tmp_path, devmodel, monkeypatch) as memory:
        port = free_port()
        async with (
            serve_agent(agent_env(devmodel, port, "a", **remote(memory))),
            aiohttp.ClientSession() as http,
        ):
            memory.release.clear()
            # Answered while its write is held at the memory service's door.
            assert await asyncio.wait_for(chat(http, port, FACT), 30) == f"Echo: {FACT}"
            await asyncio.wait_for(memory.write_arrived.wait(), 30)
            assert await window(memory) == []

            second = asyncio.create_task(chat(http, port, "what is my locker code?"))
            memory.release.set()
            await asyncio.wait_for(second, 30)
    # The second turn's model request replayed the first turn: its recall came after the write.
    replayed = next(
        r["messages"]
        for r in reversed(devmodel.requests())
        if r["messages"][-1]["content"] == "what is my locker code?"
    )
    assert [m["content"] for m in replayed if m["role"] in ("user", "assistant")] == [
        FACT,
        f"Echo: {FACT}",
        "what is my locker code?",
    ]


async def test_a_write_pending_at_shutdown_is_sent_before_the_agent_stops(
    tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with recording_memory(tmp_path, devmodel, monkeypatch) as memory:
        port = free_port()
        memory.release.clear()
        async with aiohttp.ClientSession() as http:
            agent = serve_agent(agent_env(devmodel, port, "a", **remote(memory)))
            await agent.__aenter__()
            try:
                await asyncio.wait_for(chat(http, port, FACT), 30)
                await asyncio.wait_for(memory.write_arrived.wait(), 30)
            finally:
                stopping = asyncio.create_task(agent.__aexit__(None, None, None))
                memory.release.set()
                await asyncio.wait_for(stopping, 30)
        assert await window(memory) == [FACT, f"Echo: {FACT}"]


async def test_strict_mode_writes_before_it_answers(
    tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with recording_memory(tmp_path, devmodel, monkeypatch) as memory:
        port = free_port()
        env = agent_env(devmodel, port, "a", **remote(memory, MEMORY_FAILURE_MODE="strict"))
        async with serve_agent(env), aiohttp.ClientSession() as http:
            memory.release.clear()
            answered = asyncio.create_task(chat(http, port, FACT))
            await asyncio.wait_for(memory.write_arrived.wait(), 30)
            # The write is at the door and the answer has not come: release it, then it does.
            assert not answered.done()
            memory.release.set()
            assert await asyncio.wait_for(answered, 30) == f"Echo: {FACT}"
            assert await window(memory) == [FACT, f"Echo: {FACT}"]


async def test_a_forget_after_the_answer_wins_over_the_write_still_on_its_way(
    tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with recording_memory(tmp_path, devmodel, monkeypatch) as memory:
        port = free_port()
        async with (
            serve_agent(agent_env(devmodel, port, "a", **remote(memory))),
            aiohttp.ClientSession() as http,
        ):
            memory.release.clear()
            await asyncio.wait_for(chat(http, port, FACT), 30)
            await asyncio.wait_for(memory.write_arrived.wait(), 30)
            # alice has her answer and erases the conversation; the write is still held.
            async with MemoryServiceClient(memory.url, agent_identity=IDENTITY) as client:
                forgot = await client.forget("session", session_id="s1", principal="alice")
            assert not forgot.degraded
            memory.release.set()

            async def writes() -> int:
                return len(memory.ids("/v1/write"))

            await eventually(writes, lambda n: n == 1, within=30, what="the write answered")
        assert await window(memory) == []
