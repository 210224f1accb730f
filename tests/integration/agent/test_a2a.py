"""A2A: the agent card and JSON-RPC, spoken to by the a2a-sdk client and by hand."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from tests.fixtures.agent import AgentFactory
from tests.support.devmodel import DevModel
from tests.support.procs import ServiceProcess


@pytest.fixture(scope="module")
def agent(module_agent_factory: AgentFactory) -> ServiceProcess:
    return module_agent_factory(
        "a2a-agent",
        AGENT_DESCRIPTION="Answers questions.",
        AGENT_SUB_AGENTS="helper:http://127.0.0.1:9",
    )


def user_message(text: str) -> pb.Message:
    return pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, parts=[pb.Part(text=text)])


@contextlib.asynccontextmanager
async def sdk_client(
    agent: ServiceProcess, *, polling: bool = False, principal: str | None = None
) -> AsyncIterator[Any]:
    """An a2a-sdk client resolved from the agent's card; extra headers on every call."""
    headers = {} if principal is None else {"X-Principal": principal}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http, polling=polling))
        yield await factory.create_from_url(agent.url)


async def test_card_is_served_at_both_paths(agent: ServiceProcess) -> None:
    async with aiohttp.ClientSession() as http:
        cards = []
        for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
            async with http.get(agent.url + path) as resp:
                assert resp.status == 200
                cards.append(await resp.json())
    card = cards[0]
    assert cards[0] == cards[1]
    assert card["name"] == "a2a-agent" and card["description"] == "Answers questions."
    assert card["url"] == agent.url + "/"
    assert card["supportedInterfaces"][0] == {
        "url": agent.url + "/",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert card["capabilities"]["streaming"] is False
    skill_names = {s["name"] for s in card["skills"]}
    assert "delegate_to_helper" in skill_names


async def test_sdk_client_sends_gets_and_cannot_cancel_a_finished_task(
    agent: ServiceProcess,
) -> None:
    async with sdk_client(agent) as client:
        events = [
            e
            async for e in client.send_message(
                pb.SendMessageRequest(message=user_message("hi there"))
            )
        ]
        assert len(events) == 1 and events[0].HasField("task")
        task = events[0].task
        assert task.status.state == pb.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "Echo: hi there"
        assert [m.role for m in task.history] == [pb.ROLE_USER, pb.ROLE_AGENT]

        fetched = await client.get_task(pb.GetTaskRequest(id=task.id))
        assert fetched.id == task.id and fetched.status.state == pb.TASK_STATE_COMPLETED

        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(pb.CancelTaskRequest(id=task.id))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(pb.GetTaskRequest(id="no-such-task"))


async def test_running_task_can_be_cancelled(agent: ServiceProcess, devmodel: DevModel) -> None:
    devmodel.set_faults(delay=30, routes=["chat"])
    async with sdk_client(agent, polling=True) as client:
        events = [
            e
            async for e in client.send_message(pb.SendMessageRequest(message=user_message("slow")))
        ]
        task = events[0].task
        assert task.status.state == pb.TASK_STATE_WORKING
        cancelled = await client.cancel_task(pb.CancelTaskRequest(id=task.id))
        assert cancelled.status.state == pb.TASK_STATE_CANCELED
        fetched = await client.get_task(pb.GetTaskRequest(id=task.id))
        assert fetched.status.state == pb.TASK_STATE_CANCELED


async def test_tasks_of_another_principal_do_not_exist(agent: ServiceProcess) -> None:
    async with (
        sdk_client(agent, principal="alice") as alice,
        sdk_client(agent, principal="mallory") as mallory,
    ):
        events = [
            e
            async for e in alice.send_message(pb.SendMessageRequest(message=user_message("secret")))
        ]
        task_id = events[0].task.id
        assert (await alice.get_task(pb.GetTaskRequest(id=task_id))).id == task_id
        with pytest.raises(TaskNotFoundError):
            await mallory.get_task(pb.GetTaskRequest(id=task_id))


async def rpc(agent: ServiceProcess, body: bytes | dict[str, Any]) -> tuple[int, dict[str, Any]]:
    kwargs: dict[str, Any] = (
        {"data": body, "headers": {"Content-Type": "application/json"}}
        if isinstance(body, bytes)
        else {"json": body}
    )
    async with aiohttp.ClientSession() as http, http.post(agent.url + "/", **kwargs) as resp:
        return resp.status, await resp.json()


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{oops", -32700),
        ({"jsonrpc": "1.0", "id": 1, "method": "SendMessage"}, -32600),
        ([{"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}], -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "Teleport", "params": {}}, -32601),
        ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": 7}}, -32602),
        (
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {"message": {"parts": []}},
            },
            -32602,
        ),
        ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}}, -32001),
        ({"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": "nope"}}, -32001),
        ({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {}}, -32004),
    ],
)
async def test_json_rpc_errors(agent: ServiceProcess, body: Any, code: int) -> None:
    raw = body if isinstance(body, bytes) else None
    status, doc = await rpc(agent, raw if raw is not None else body)
    assert status == 200
    assert doc["jsonrpc"] == "2.0" and doc["error"]["code"] == code and doc["error"]["message"]


async def test_protocol_0_3_method_names(agent: ServiceProcess) -> None:
    status, doc = await rpc(
        agent,
        {
            "jsonrpc": "2.0",
            "id": "x",
            "method": "message/send",
            "params": {
                "message": {
                    "kind": "message",
                    "messageId": "m1",
                    "role": "user",
                    "parts": [{"kind": "text", "text": "old client"}],
                }
            },
        },
    )
    assert status == 200 and doc["id"] == "x"
    task = doc["result"]
    assert task["kind"] == "task" and task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"][0]["text"] == "Echo: old client"
    _, got = await rpc(
        agent, {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task["id"]}}
    )
    assert got["result"]["id"] == task["id"]
    _, cancel = await rpc(
        agent, {"jsonrpc": "2.0", "id": 3, "method": "tasks/cancel", "params": {"id": task["id"]}}
    )
    assert cancel["error"]["code"] == -32002
