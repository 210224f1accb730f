"""One run context for every entry point: the request id travels, the depth rule is shared.

The agents and the memory service are served in the test's event loop from their own
application factories; the memory service records, on its side, the request id its
middleware assigned to every request it answered. The model is the devmodel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kaos_agent.context import MAX_DEPTH_VALUE, parse_depth, run_context
from kaos_core.errors import BadRequest

from tests.fixtures.agent import RecordingMemory, agent_env, recording_memory, serve_agent
from tests.support.devmodel import DevModel
from tests.support.procs import free_port

DELEGATE_SCRIPT: list[dict[str, Any]] = [
    {
        "match": "ask b",
        "tool_call": {"name": "delegate_to_b", "arguments": {"message": "note code 4711"}},
    },
    {"after_tool": "delegate_to_b", "reply": "B said: {result}"},
]


def remote(memory: RecordingMemory, name: str) -> dict[str, str]:
    return {
        "MEMORY_TYPE": "remote",
        "MEMORY_ENDPOINT": memory.url,
        "AGENT_IDENTITY": f"kaos://agent/test/{name}",
        "MEMORY_MAX_READ_SCOPE": "agent",
    }


def send_message(text: str, **metadata: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}
    if metadata:
        message["metadata"] = {"kaos": metadata}
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}


async def test_an_a2a_run_carries_its_request_id_to_memory_and_to_its_peer(
    tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with recording_memory(tmp_path, devmodel, monkeypatch) as memory:
        b_port, a_port = free_port(), free_port()
        async with (
            serve_agent(agent_env(devmodel, b_port, "b", **remote(memory, "b"))),
            serve_agent(
                agent_env(
                    devmodel,
                    a_port,
                    "a",
                    AGENT_SUB_AGENTS=f"b:http://127.0.0.1:{b_port}",
                    **remote(memory, "a"),
                )
            ),
            aiohttp.ClientSession() as http,
        ):
            devmodel.set_script(DELEGATE_SCRIPT)
            async with http.post(
                f"http://127.0.0.1:{a_port}/",
                json=send_message("please ask b"),
                headers={"X-Session-Id": "sess-1", "X-Principal": "alice"},
            ) as resp:
                assert resp.status == 200
                doc = await resp.json()
                rid = resp.headers["X-Request-Id"]  # the id A's middleware gave the run
            task = doc["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            assert task["artifacts"][0]["parts"][0]["text"] == "B said: Echo: note code 4711"
    # A's recall and write, and B's (the delegated run), all under the A2A run's id.
    assert memory.ids("/v1/recall") == [rid, rid]
    assert memory.ids("/v1/write") == [rid, rid]


@pytest.mark.parametrize("depth", ["-1", str(MAX_DEPTH_VALUE + 1), "two", "1.5", ""])
async def test_chat_and_a2a_refuse_the_same_out_of_range_depth(
    devmodel: DevModel, depth: str
) -> None:
    port = free_port()
    headers = {"X-KAOS-Delegation-Depth": depth}
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    async with (
        serve_agent(agent_env(devmodel, port, "d")),
        aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}") as http,
    ):
        async with http.post("/v1/chat/completions", json=chat, headers=headers) as resp:
            assert resp.status == 400
            chat_error = (await resp.json())["error"]
        async with http.post("/", json=send_message("hi"), headers=headers) as resp:
            assert resp.status == 200
            rpc_error = (await resp.json())["error"]
        async with http.get("/metrics") as resp:
            metrics = await resp.text()
    assert chat_error["code"] == "bad_delegation_depth"
    assert rpc_error["code"] == -32602  # invalid params
    assert rpc_error["message"] == chat_error["message"]
    assert "kaos_agent_runs_total{" not in metrics  # neither entry point ran the agent


async def test_a2a_metadata_depth_follows_the_header_rule(devmodel: DevModel) -> None:
    port = free_port()
    async with (
        serve_agent(agent_env(devmodel, port, "d")),
        aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}") as http,
    ):
        body = send_message("hi", delegationDepth=MAX_DEPTH_VALUE + 1)
        async with http.post("/", json=body) as resp:
            refused = await resp.json()
        async with http.post("/", json=send_message("hi", delegationDepth=2)) as resp:
            accepted = await resp.json()
    assert refused["error"]["code"] == -32602
    assert accepted["result"]["task"]["metadata"]["kaos"]["delegationDepth"] == 2


def test_the_run_context_parser() -> None:
    deps = run_context(
        {"X-Session-Id": "s", "X-Principal": "p", "X-KAOS-Delegation-Depth": "2"},
        request_id="r",
    )
    assert (deps.session_id, deps.principal, deps.depth, deps.request_id) == ("s", "p", 2, "r")
    # Body fallbacks apply only when the header is absent, and are validated the same way.
    assert run_context({}, request_id=None, session="ctx", depth=1.0).session_id == "ctx"
    assert run_context({"X-Session-Id": "h"}, request_id=None, session="ctx").session_id == "h"
    assert run_context({}, request_id=None).session_id.startswith("s-")
    with pytest.raises(BadRequest):
        run_context({}, request_id=None, session="*")
    with pytest.raises(BadRequest):
        run_context({}, request_id=None, depth="")
    with pytest.raises(BadRequest):
        run_context({"X-Principal": "\x00"}, request_id=None)
    assert parse_depth(MAX_DEPTH_VALUE) == MAX_DEPTH_VALUE
    for bad in (True, None, 1.5, "²", MAX_DEPTH_VALUE + 1):
        with pytest.raises(BadRequest):
            parse_depth(bad)
