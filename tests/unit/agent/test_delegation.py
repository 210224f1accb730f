"""A delegation's call to a peer, in-process: what it sends, and what each kind of answer
becomes (the peer's answer, a fallback to chat completions, or the failure the delegating
model reads). The last test pins the a2a-sdk client behaviour that keeps delegation off it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory, minimal_agent_card
from a2a.client.errors import A2AClientError
from a2a.types import Message, Part, Role, SendMessageRequest
from a2a.utils.constants import TransportProtocol
from aiohttp import web
from aiohttp.test_utils import TestServer
from kaos_agent.context import RunDeps
from kaos_agent.delegation import PeerClient, PeerUnavailable
from kaos_core import wire
from kaos_core.endpoints import Endpoint
from multidict import CIMultiDict
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

DEPS = RunDeps(session_id="s-1", principal="alice", request_id="r-1")
TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
REFUSAL = {"jsonrpc": "2.0", "id": "1", "error": {"code": -32600, "message": "token refused"}}


def result(value: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": "1", "result": value})


@dataclass
class Peer:
    """A peer whose ``POST /`` answers what the test sets, whose chat completions answer
    "chat ok", and which records every request (endpoint, headers, body)."""

    url: str = ""
    status: int = 200
    body: str = result({"message": {"parts": [{"text": "ok"}]}})
    content_type: str = "application/json"
    # Set: the A2A answer waits until the test releases it.
    held: asyncio.Event | None = None
    seen: list[tuple[str, CIMultiDict[str], Any]] = field(default_factory=list)

    def answers(self, status: int, body: str, content_type: str = "application/json") -> None:
        self.status, self.body, self.content_type = status, body, content_type

    def endpoints(self) -> list[str]:
        return [endpoint for endpoint, _, _ in self.seen]


@pytest.fixture
async def peer() -> AsyncIterator[Peer]:
    peer = Peer()

    async def a2a(request: web.Request) -> web.Response:
        peer.seen.append(("a2a", request.headers.copy(), await request.json()))
        if peer.held is not None:
            await peer.held.wait()
        return web.Response(status=peer.status, text=peer.body, content_type=peer.content_type)

    async def chat(request: web.Request) -> web.Response:
        peer.seen.append(("chat", request.headers.copy(), await request.json()))
        return web.json_response({"choices": [{"message": {"content": "chat ok"}}]})

    app = web.Application()
    app.router.add_post("/", a2a)
    app.router.add_post("/v1/chat/completions", chat)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    peer.url = str(server.make_url("")).rstrip("/")
    try:
        yield peer
    finally:
        if peer.held is not None:
            peer.held.set()
        await server.close()


async def ask(url: str, *, peer_timeout: float = 5) -> tuple[str, str]:
    async with aiohttp.ClientSession() as http:
        return await PeerClient(http, timeout=peer_timeout).ask(Endpoint("b", url), "hi", DEPS, 1)


async def test_the_message_carries_identity_depth_and_the_trace(peer: Peer) -> None:
    caller = SpanContext(TRACE_ID, 0x42, is_remote=False, trace_flags=TraceFlags(1))
    with trace.use_span(NonRecordingSpan(caller)):
        assert await ask(peer.url) == ("ok", "a2a")
    [(_, headers, body)] = peer.seen
    assert headers[wire.A2A_VERSION_HEADER] == "1.0"
    assert headers[wire.SESSION_HEADER] == "s-1"
    assert headers[wire.PRINCIPAL_HEADER] == "alice"
    assert headers[wire.REQUEST_ID_HEADER] == "r-1"
    assert headers[wire.DELEGATION_DEPTH_HEADER] == "1"
    assert headers["traceparent"].split("-")[1] == f"{TRACE_ID:032x}"
    assert body["method"] == "SendMessage"
    message = body["params"]["message"]
    assert (message["role"], message["parts"]) == ("ROLE_USER", [{"text": "hi"}])
    assert message["contextId"] == "s-1"
    assert message["metadata"] == {"kaos": {"delegationDepth": 1}}
    assert body["params"]["configuration"] == {"acceptedOutputModes": ["text/plain"]}


async def test_a_completed_task_answers_its_artifacts_and_a_failed_one_fails(peer: Peer) -> None:
    artifacts = [{"parts": [{"text": "one"}]}, {"parts": [{"text": "two"}]}]
    done = {"status": {"state": "TASK_STATE_COMPLETED"}, "artifacts": artifacts}
    peer.answers(200, result({"task": done}))
    assert await ask(peer.url) == ("one\ntwo", "a2a")
    failed = {"status": {"state": "TASK_STATE_FAILED", "message": {"parts": [{"text": "no"}]}}}
    peer.answers(200, result({"task": failed}))
    with pytest.raises(PeerUnavailable, match=r"^peer task ended in TASK_STATE_FAILED: no$"):
        await ask(peer.url)


@pytest.mark.parametrize("status", [200, 401, 403, 503])
async def test_a_json_rpc_error_is_the_peers_code_and_message_whatever_the_status(
    peer: Peer, status: int
) -> None:
    peer.answers(status, json.dumps(REFUSAL))
    with pytest.raises(PeerUnavailable, match=r"^A2A error -32600: token refused$"):
        await ask(peer.url)
    assert peer.endpoints() == ["a2a"]  # a refusal is not a missing endpoint


NO_A2A = {
    "not found": (404, "404: Not Found", "text/plain"),
    "method not allowed": (405, "", "text/plain"),
    "not implemented": (501, "", "text/plain"),
    "not JSON": (200, "<html></html>", "text/html"),
    "a server error that is not JSON": (500, "boom", "text/plain"),
    "JSON but not JSON-RPC": (
        200,
        json.dumps({"error": {"code": "not_found"}}),
        "application/json",
    ),
    "method not found": (
        200,
        json.dumps({"jsonrpc": "2.0", "id": "1", "error": {"code": -32601, "message": "nope"}}),
        "application/json",
    ),
}


@pytest.mark.parametrize("answer", NO_A2A.values(), ids=NO_A2A.keys())
async def test_a_peer_without_a2a_gets_the_message_over_chat_completions(
    peer: Peer, answer: tuple[int, str, str]
) -> None:
    peer.answers(*answer)
    assert await ask(peer.url) == ("chat ok", "chat")
    assert peer.endpoints() == ["a2a", "chat"]
    _, headers, body = peer.seen[1]
    assert body == {"model": "b", "messages": [{"role": "user", "content": "hi"}]}
    assert headers[wire.DELEGATION_DEPTH_HEADER] == "1"
    assert wire.A2A_VERSION_HEADER not in headers


async def test_a_transport_failure_is_told_in_fixed_words(peer: Peer) -> None:
    peer.held = asyncio.Event()
    with pytest.raises(PeerUnavailable, match=r"^timed out$"):
        await ask(peer.url, peer_timeout=0.2)
    with pytest.raises(PeerUnavailable, match=r"^could not connect$"):
        await ask("http://127.0.0.1:9")


async def test_a2a_sdk_client_loses_a_refusals_json_rpc_error() -> None:
    """Pinned because delegation does not use this client: it raises on the HTTP status
    before reading the body, so the refusal's code and message are gone."""
    transport = httpx.MockTransport(lambda request: httpx.Response(401, json=REFUSAL))
    request = SendMessageRequest(
        message=Message(message_id="m-1", role=Role.ROLE_USER, parts=[Part(text="hi")])
    )
    async with httpx.AsyncClient(transport=transport) as http:
        config = ClientConfig(
            streaming=False,
            httpx_client=http,
            supported_protocol_bindings=[TransportProtocol.JSONRPC],
        )
        card = minimal_agent_card("http://peer/", [TransportProtocol.JSONRPC])
        client = ClientFactory(config).create(card)
        with pytest.raises(A2AClientError) as raised:
            async for _ in client.send_message(request):
                pass
    assert isinstance(raised.value.__cause__, httpx.HTTPStatusError)
    assert str(raised.value).startswith("HTTP Error 401")
    assert "token refused" not in str(raised.value)
