"""On the agent, hostile input to chat and A2A is a clear error and runs nothing.

Each example of the issue is one test against a real ``kaos-agent`` over loopback, its
model the devmodel. Requests go out as raw bytes over a socket (HTTP clients refuse to
send a header byte that is not UTF-8, or to repeat a header). Chat answers a 4xx with the
JSON error shape; A2A answers a JSON-RPC error object (HTTP 200, as for every A2A error).
After each refusal the devmodel's chat counter and the agent's A2A task list show that no
run started.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fixtures.agent import AgentFactory
from tests.support.devmodel import DevModel
from tests.support.procs import ServiceProcess
from tests.support.rawhttp import Header, post_json

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602


@pytest.fixture(scope="module")
def agent(module_agent_factory: AgentFactory) -> ServiceProcess:
    return module_agent_factory("hostile", AGENT_INSTRUCTIONS="You are a test agent.")


def json_headers(*extra: Header) -> list[Header]:
    return [("Content-Type", b"application/json"), *extra]


def send_message(text: str = "hello", *, req_id: Any = 1, **message: Any) -> dict[str, Any]:
    msg = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}], **message}
    return {"jsonrpc": "2.0", "id": req_id, "method": "SendMessage", "params": {"message": msg}}


def chat(text: str = "hello") -> bytes:
    return json.dumps({"messages": [{"role": "user", "content": text}]}).encode()


def nested(depth: int) -> Any:
    doc: Any = "deep"
    for _ in range(depth):
        doc = {"x": doc}
    return doc


class NothingRuns:
    """The model's chat count and the agent's A2A task count, to compare after a refusal."""

    def __init__(self, agent: ServiceProcess, devmodel: DevModel) -> None:
        self.agent = agent
        self.devmodel = devmodel
        self.chats = 0
        self.tasks = 0

    async def tasks_now(self) -> int:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})
        _, doc = await post_json(self.agent.url, "/", body.encode(), json_headers())
        return int(doc["result"].get("totalSize", 0))

    async def __aenter__(self) -> NothingRuns:
        self.chats = (await self.devmodel.astats())["chat"]
        self.tasks = await self.tasks_now()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is None:
            assert (await self.devmodel.astats())["chat"] == self.chats, "the model was called"
            assert await self.tasks_now() == self.tasks, "an A2A task was created"


def rpc_error(status: int, doc: dict[str, Any], code: int) -> str:
    """The JSON-RPC error message, after checking the envelope and its code."""
    assert status == 200, doc
    assert doc["jsonrpc"] == "2.0" and "result" not in doc, doc
    assert doc["error"]["code"] == code, doc
    message = doc["error"]["message"]
    assert isinstance(message, str) and message, doc
    return message


def http_error(doc: dict[str, Any], code: str) -> str:
    assert doc["error"]["code"] == code, doc
    assert isinstance(doc.get("request_id"), str) and doc["request_id"], doc
    message = doc["error"]["message"]
    assert isinstance(message, str) and message, doc
    return message


# --- A2A ------------------------------------------------------------------------------


async def test_a2a_body_nested_1000_deep_is_a_json_rpc_error(
    agent: ServiceProcess, devmodel: DevModel
) -> None:
    async with NothingRuns(agent, devmodel):
        body = b"[" * 1000 + b"]" * 1000
        status, doc = await post_json(agent.url, "/", body, json_headers())
    assert "nested deeper than 32 levels" in rpc_error(status, doc, INVALID_REQUEST)
    assert doc["id"] is None


async def test_a2a_message_metadata_nested_100_deep_is_a_json_rpc_error(
    agent: ServiceProcess, devmodel: DevModel
) -> None:
    async with NothingRuns(agent, devmodel):
        body = json.dumps(send_message(metadata=nested(100))).encode()
        status, doc = await post_json(agent.url, "/", body, json_headers())
    message = rpc_error(status, doc, INVALID_REQUEST)
    assert message.startswith("params.message.metadata") and "nested deeper" in message


async def test_a2a_4301_digit_json_rpc_id_is_a_json_rpc_error(
    agent: ServiceProcess, devmodel: DevModel
) -> None:
    async with NothingRuns(agent, devmodel):
        body = (
            json.dumps(send_message(req_id=0)).encode().replace(b'"id": 0', b'"id": ' + b"7" * 4301)
        )
        status, doc = await post_json(agent.url, "/", body, json_headers())
    assert "4301 characters" in rpc_error(status, doc, INVALID_REQUEST)
    assert doc["id"] is None


async def test_a2a_gzip_content_encoding_with_a_body_that_is_not_gzip_is_refused(
    agent: ServiceProcess, devmodel: DevModel
) -> None:
    async with NothingRuns(agent, devmodel):
        body = json.dumps(send_message()).encode()
        headers = json_headers(("Content-Encoding", b"gzip"))
        status, doc = await post_json(agent.url, "/", body, headers)
    message = rpc_error(status, doc, INVALID_REQUEST)
    assert "Content-Encoding 'gzip' is not accepted" in message


async def test_a2a_nul_in_message_text_is_invalid_params(
    agent: ServiceProcess, devmodel: DevModel
) -> None:
    async with NothingRuns(agent, devmodel):
        body = json.dumps(send_message("a\u0000b")).encode()
        status, doc = await post_json(agent.url, "/", body, json_headers())
    message = rpc_error(status, doc, INVALID_PARAMS)
    assert message.startswith("params.message.parts[0].text") and "U+0000" in message


async def test_a2a_invalid_utf8_x_session_id_is_invalid_params(
    agent: ServiceProcess, devmodel: DevModel
) -> None:
    async with NothingRuns(agent, devmodel):
        body = json.dumps(send_message()).encode()
        headers = json_headers(("X-Session-Id", b"s-\xc3\x28"))
        status, doc = await post_json(agent.url, "/", body, headers)
    message = rpc_error(status, doc, INVALID_PARAMS)
    assert message.startswith("X-Session-Id must be valid UTF-8 text")
    assert doc["id"] == 1


async def test_a2a_non_utf8_byte_in_x_principal_is_invalid_params(
    agent: ServiceProcess, devmodel: DevModel
) -> None:
    async with NothingRuns(agent, devmodel):
        body = json.dumps(send_message()).encode()
        headers = json_headers(("X-Principal", b"al\xffce"))
        status, doc = await post_json(agent.url, "/", body, headers)
    assert rpc_error(status, doc, INVALID_PARAMS).startswith("X-Principal must be valid UTF-8")


@pytest.mark.parametrize("header", ["X-Principal", "X-Session-Id", "X-KAOS-Delegation-Depth"])
async def test_a2a_repeated_identity_header_is_invalid_params(
    agent: ServiceProcess, devmodel: DevModel, header: str
) -> None:
    async with NothingRuns(agent, devmodel):
        body = json.dumps(send_message()).encode()
        headers = json_headers((header, b"1"), (header, b"2"))
        status, doc = await post_json(agent.url, "/", body, headers)
    assert rpc_error(status, doc, INVALID_PARAMS) == f"{header} given more than once"


async def test_a2a_utf8_principal_is_accepted(agent: ServiceProcess, devmodel: DevModel) -> None:
    # Valid non-ASCII UTF-8 is a name like any other (the refusal is of undecodable bytes).
    body = json.dumps(send_message("hi josé")).encode()
    headers = json_headers(("X-Principal", "josé".encode()))
    status, doc = await post_json(agent.url, "/", body, headers)
    assert status == 200, doc
    task = doc["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    assert task["metadata"]["kaos"]["principal"] == "josé"


# --- chat -----------------------------------------------------------------------------


async def test_chat_body_nested_1000_deep_is_400(agent: ServiceProcess, devmodel: DevModel) -> None:
    async with NothingRuns(agent, devmodel):
        body = b'{"messages": ' + b"[" * 1000 + b"]" * 1000 + b"}"
        status, doc = await post_json(agent.url, "/v1/chat/completions", body, json_headers())
    assert status == 400
    assert "nested deeper than 32 levels" in http_error(doc, "json_too_deep")


async def test_chat_gzip_content_encoding_is_415(agent: ServiceProcess, devmodel: DevModel) -> None:
    async with NothingRuns(agent, devmodel):
        headers = json_headers(("Content-Encoding", b"gzip"))
        status, doc = await post_json(agent.url, "/v1/chat/completions", chat(), headers)
    assert status == 415
    assert "Content-Encoding 'gzip'" in http_error(doc, "unsupported_encoding")


async def test_chat_nul_in_a_message_is_400(agent: ServiceProcess, devmodel: DevModel) -> None:
    async with NothingRuns(agent, devmodel):
        status, doc = await post_json(
            agent.url, "/v1/chat/completions", chat("a\u0000b"), json_headers()
        )
    assert status == 400
    message = http_error(doc, "invalid_text")
    assert message.startswith("messages[0].content") and "U+0000" in message


@pytest.mark.parametrize(
    ("header", "value"), [("X-Principal", b"al\xffce"), ("X-Session-Id", b"s-\xc3\x28")]
)
async def test_chat_non_utf8_identity_header_is_400(
    agent: ServiceProcess, devmodel: DevModel, header: str, value: bytes
) -> None:
    async with NothingRuns(agent, devmodel):
        headers = json_headers((header, value))
        status, doc = await post_json(agent.url, "/v1/chat/completions", chat(), headers)
    assert status == 400
    message = http_error(doc, "bad_identity_header")
    assert message.startswith(f"{header} must be valid UTF-8 text")


@pytest.mark.parametrize("header", ["X-Principal", "X-Session-Id"])
async def test_chat_repeated_identity_header_is_400(
    agent: ServiceProcess, devmodel: DevModel, header: str
) -> None:
    async with NothingRuns(agent, devmodel):
        headers = json_headers((header, b"alice"), (header, b"mallory"))
        status, doc = await post_json(agent.url, "/v1/chat/completions", chat(), headers)
    assert status == 400
    assert http_error(doc, "bad_identity_header") == f"{header} given more than once"
