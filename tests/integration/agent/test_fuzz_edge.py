"""Hostile bytes at the agent's edge: chat completions and A2A JSON-RPC.

A real ``kaos-agent`` whose model is the session's ``kaos-devmodel`` and whose memory is a
real ``kaos-memory`` (remote memory, local storage). Each example is one mutated request
(``tests.support.hostile``) over a raw socket: answered within the deadline, never a 5xx,
JSON that names no Python exception; a request marked hostile refused (chat: a 4xx; A2A:
a JSON-RPC error object, or a 4xx); and a refused request started no run: the model saw
no chat request and the memory service stored no row. After the run the agent still
answers its probes and serves a valid chat completion and a valid A2A message.

The memory service runs with a token budget no example reaches and the idle flush off,
so it calls the model for nothing but the agent's runs.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import pytest
from hypothesis import example, given

from tests.fixtures.agent import AgentFactory
from tests.fixtures.memory import memory_env
from tests.support.devmodel import DevModel
from tests.support.hostile import (
    SERVICE_ENV,
    SESSION_PLACEHOLDER,
    Endpoint,
    Expect,
    HeaderCase,
    RawRequest,
    fuzz_settings,
    hostile_requests,
    issue_cases,
    run_one,
)
from tests.support.memory import MemoryDb
from tests.support.memory_http import writes_settled_sync
from tests.support.procs import ServiceProcess, console_script, free_port, start_service

AGENT_IDENTITY = "kaos://agent/fuzz/agent"
IDENTITY = ("X-Agent-Identity", "X-Principal", "X-Session-Id")
HEADERS = (
    ("Content-Type", "application/json"),
    ("X-Agent-Identity", "kaos://agent/fuzz/caller"),
    ("X-Principal", "fuzz-principal"),
    ("X-Session-Id", SESSION_PLACEHOLDER),
)
DEPTH = "X-KAOS-Delegation-Depth"
DEPTH_CASES = (
    HeaderCase(DEPTH, b"3", Expect.ANY),
    HeaderCase(DEPTH, b" 3 ", Expect.ANY),
    HeaderCase(DEPTH, b"-1", Expect.REFUSE),
    HeaderCase(DEPTH, b"1001", Expect.REFUSE),
    HeaderCase(DEPTH, b"3.0", Expect.REFUSE),
    HeaderCase(DEPTH, b"1e3", Expect.REFUSE),
    HeaderCase(DEPTH, b"abc", Expect.REFUSE),
    HeaderCase(DEPTH, b"9" * 4301, Expect.REFUSE),
    HeaderCase(DEPTH, b"\xff", Expect.REFUSE),
    HeaderCase(DEPTH, b"", Expect.REFUSE),
)
MEMORY_TABLES = ("kaos_mem_turns", "kaos_mem_sessions", "kaos_mem_attribution")

CHAT = Endpoint(
    name="agent chat",
    method="POST",
    path="/v1/chat/completions",
    body={"model": "fuzz", "messages": [{"role": "user", "content": "fuzz prompt"}]},
    headers=HEADERS,
    identity_headers=IDENTITY,
    # OpenAI clients send many fields the agent does not use: an unknown one is accepted.
    forbids_unknown_fields=False,
    nullable=(("model",),),
    max_body=8 * 1024 * 1024,
    header_cases=DEPTH_CASES,
    deep_paths=(("messages", 0, "content"),),
)
# The streamed answer (server-sent events) has its own path through the runtime.
CHAT_STREAM = replace(
    CHAT,
    name="agent chat stream",
    body={**CHAT.body, "stream": True},
    # pydantic's lax mode reads "true", 1 and the like as a bool.
    lenient=(("stream",),),
    deep_paths=(),
)
A2A = Endpoint(
    name="agent A2A SendMessage",
    method="POST",
    path="/",
    body={
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m-fuzz",
                "role": "ROLE_USER",
                "parts": [{"text": "fuzz prompt"}],
                "metadata": {"note": "x"},
            }
        },
    },
    headers=HEADERS,
    jsonrpc=True,
    checks_content_type=False,  # JSON-RPC bodies are decoded whatever their content type
    identity_headers=IDENTITY,
    # The id may be a string, an integer or null; enums accept their numbers; metadata
    # holds any JSON.
    lenient=(("id",), ("params", "message", "role"), ("params", "message", "metadata", "*")),
    max_body=8 * 1024 * 1024,
    header_cases=(
        *DEPTH_CASES,
        HeaderCase("A2A-Version", b"2.0", Expect.REFUSE),
        HeaderCase("A2A-Version", b"\xff", Expect.REFUSE),
        HeaderCase("A2A-Version", b"0.3", Expect.ANY),
    ),
    deep_paths=(("params", "message", "metadata"),),
)
A2A_LEGACY = Endpoint(
    name="agent A2A message/send",
    method="POST",
    path="/",
    body={
        "jsonrpc": "2.0",
        "id": "r-fuzz",
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "m-fuzz",
                "role": "user",
                "parts": [{"kind": "text", "text": "fuzz prompt"}],
            }
        },
    },
    headers=HEADERS,
    jsonrpc=True,
    checks_content_type=False,
    identity_headers=IDENTITY,
    lenient=(("id",),),
    max_body=8 * 1024 * 1024,
    deep_paths=(("params", "message", "parts", 0, "text"),),
)


@dataclass
class Fuzzed:
    agent: ServiceProcess
    memory: ServiceProcess
    db: MemoryDb
    model: DevModel


@pytest.fixture(scope="module")
def fuzzed(
    module_agent_factory: AgentFactory,
    devmodel_server: ServiceProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Fuzzed]:
    root = tmp_path_factory.mktemp("agent-fuzz-memory")
    port = free_port()
    env = memory_env(
        backend="local",
        data_dir=root / "data",
        dsn=None,
        model_base_url=f"{devmodel_server.url}/v1",
        port=port,
        overrides={"token_budget": 10_000_000, "idle_flush_seconds": 0},
    )
    memory = start_service(
        "memory-for-agent-fuzz",
        [console_script("kaos-memory")],
        port=port,
        env={**env, **SERVICE_ENV},
        log_dir=root,
        timeout=120,
    )
    try:
        agent = module_agent_factory(
            "fuzzed",
            MEMORY_TYPE="remote",
            MEMORY_ENDPOINT=memory.url,
            AGENT_IDENTITY=AGENT_IDENTITY,
            MEMORY_MAX_READ_SCOPE="agent",
            **SERVICE_ENV,
        )
        db = MemoryDb(backend="local", data_dir=root / "data", dsn=None, collection="")
        yield Fuzzed(agent, memory, db, DevModel(url=devmodel_server.url))
    finally:
        memory.stop(timeout=15)


def calls_and_rows(fz: Fuzzed) -> tuple[int, ...]:
    """The model's chat requests so far and the memory service's rows, once the writes of
    the turns answered so far have reached it."""
    writes_settled_sync(fz.agent.url)
    query = "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {t})" for t in MEMORY_TABLES)
    rows = fz.db.relational(query)
    counts = tuple(int(c) for c in rows[0]) if rows else (0,) * len(MEMORY_TABLES)
    return (fz.model.stats()["chat"], *counts)


async def post(url: str, body: Any, **headers: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(url, json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json()


async def assert_healthy(fz: Fuzzed) -> None:
    assert fz.agent.alive(), fz.agent.log_tail()
    assert fz.memory.alive(), fz.memory.log_tail()
    async with aiohttp.ClientSession() as http:
        for probe in ("/healthz", "/readyz"):
            async with http.get(fz.agent.url + probe) as resp:
                assert resp.status == 200, (probe, await resp.text())
    before = calls_and_rows(fz)
    session = "after-" + uuid.uuid4().hex[:8]
    status, doc = await post(
        fz.agent.url + "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "still there"}]},
        **{"X-Session-Id": session, "X-Principal": "fuzz-principal"},
    )
    assert status == 200, doc
    assert doc["choices"][0]["message"]["content"] == "Echo: still there"
    message = {"messageId": "m-after", "role": "ROLE_USER", "parts": [{"text": "and A2A"}]}
    status, doc = await post(
        fz.agent.url + "/",
        {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": message}},
    )
    assert status == 200 and "result" in doc, doc
    task = doc["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    after = calls_and_rows(fz)
    assert after[0] == before[0] + 2 and after[1] > before[1], (before, after)


def fuzz(fz: Fuzzed, endpoints: list[Endpoint], default_examples: int) -> None:
    sessions = itertools.count()

    @fuzz_settings(default_examples)
    @given(req=hostile_requests(endpoints))
    def one(req: RawRequest) -> None:
        asyncio.run(
            run_one(
                fz.agent.port,
                req,
                session=f"fuzz-{next(sessions)}",
                snapshot=lambda: calls_and_rows(fz),
            )
        )

    for case in issue_cases(endpoints):
        one = example(req=case)(one)
    one()
    asyncio.run(assert_healthy(fz))


def test_hostile_chat_requests_are_refused_cleanly(fuzzed: Fuzzed) -> None:
    fuzz(fuzzed, [CHAT, CHAT_STREAM], 50)


def test_hostile_a2a_requests_are_refused_cleanly(fuzzed: Fuzzed) -> None:
    fuzz(fuzzed, [A2A, A2A_LEGACY], 50)
