"""On the MCP runtime, hostile bodies are JSON-RPC errors and call no tool.

Each example of the issue is one test against a real ``kaos-mcp`` (uvicorn, the SDK's
streamable HTTP app behind ``BodyGuard``) over loopback. Requests go out as raw bytes over
a socket, so what arrives is exactly what the test wrote (a false ``Content-Encoding``, a
byte that is not UTF-8). A refusal is a JSON-RPC error object with ``id`` null, served as
``application/json`` with the refusal's status; the tool-call counter on ``/metrics``
shows no tool ran.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from kaos_agent.mcp_runtime.settings import McpSettings

from tests.support.procs import ServiceProcess, console_script, free_port, start_service
from tests.support.rawhttp import Answer, Header, exchange

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
MAX_BODY = 16384

SOURCE = '''
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()
'''


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceProcess]:
    """One ``kaos-mcp`` for the module (its tool only upper-cases, so tests share it)."""
    port = free_port()
    env = dict.fromkeys(McpSettings.env_names(), "")
    env.update(
        {
            "MCP_HOST": "127.0.0.1",
            "MCP_PORT": str(port),
            "MCP_TOOLS_STRING": SOURCE,
            "MCP_MAX_BODY_BYTES": str(MAX_BODY),
        }
    )
    svc = start_service(
        "mcp-hostile",
        [console_script("kaos-mcp")],
        port=port,
        env=env,
        log_dir=tmp_path_factory.mktemp("mcp-hostile"),
        ready_path="/readyz",
    )
    try:
        yield svc
    finally:
        svc.stop(timeout=15)


async def raw_post(url: str, body: bytes, headers: list[Header] | None = None) -> Answer:
    """POST ``body`` to ``/mcp`` with ``headers`` added to those MCP needs."""
    mcp = [
        ("Content-Type", b"application/json"),
        ("Accept", b"application/json, text/event-stream"),
    ]
    return await exchange(url, "POST", "/mcp", mcp + (headers or []), body)


def call_tool(arguments: Any, req_id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": req_id,
        "method": "tools/call",
        "params": {"name": "shout", "arguments": arguments},
    }


def refusal(status: int, headers: dict[str, str], text: str, code: int) -> str:
    """The JSON-RPC error message, after checking the envelope, its code and media type."""
    assert headers["content-type"] == "application/json", headers
    doc = json.loads(text)
    assert doc["jsonrpc"] == "2.0" and doc["id"] is None and "result" not in doc, doc
    assert doc["error"]["code"] == code, doc
    message = doc["error"]["message"]
    assert isinstance(message, str) and message, doc
    return message


def nested(depth: int) -> Any:
    doc: Any = "deep"
    for _ in range(depth):
        doc = {"x": doc}
    return doc


async def shout_calls(server: ServiceProcess) -> float:
    """How many times ``shout`` ran, whatever the outcome, from the runtime's metrics."""
    _, _, text = await exchange(server.url, "GET", "/metrics", [])
    found = re.findall(r'^kaos_mcp_tool_calls_total\{[^}]*tool="shout"[^}]*\} (\S+)$', text, re.M)
    return sum(float(v) for v in found)


class NoToolRuns:
    def __init__(self, server: ServiceProcess) -> None:
        self.server = server
        self.before = 0.0

    async def __aenter__(self) -> NoToolRuns:
        self.before = await shout_calls(self.server)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if exc[0] is None:
            assert await shout_calls(self.server) == self.before, "the tool ran"


async def test_a_valid_call_still_reaches_the_tool(server: ServiceProcess) -> None:
    before = await shout_calls(server)
    status, _, text = await raw_post(server.url, json.dumps(call_tool({"text": "abc"})).encode())
    assert status == 200 and '"text":"ABC"' in text, text
    assert await shout_calls(server) == before + 1


async def test_a_body_nested_1000_deep_is_a_json_rpc_error(server: ServiceProcess) -> None:
    async with NoToolRuns(server):
        status, headers, text = await raw_post(server.url, b"[" * 1000 + b"]" * 1000)
    assert status == 400
    assert "nested deeper than 32 levels" in refusal(status, headers, text, INVALID_REQUEST)


async def test_tool_arguments_nested_100_deep_are_a_json_rpc_error(
    server: ServiceProcess,
) -> None:
    async with NoToolRuns(server):
        body = json.dumps(call_tool({"text": nested(100)})).encode()
        status, headers, text = await raw_post(server.url, body)
    assert status == 400
    message = refusal(status, headers, text, INVALID_REQUEST)
    assert message.startswith("params.arguments.text") and "nested deeper" in message


async def test_a_4301_digit_json_rpc_id_is_a_json_rpc_error(server: ServiceProcess) -> None:
    async with NoToolRuns(server):
        body = json.dumps(call_tool({"text": "abc"}, req_id=0)).encode()
        body = body.replace(b'"id": 0', b'"id": ' + b"7" * 4301)
        status, headers, text = await raw_post(server.url, body)
    assert status == 400
    assert "4301 characters" in refusal(status, headers, text, INVALID_REQUEST)


async def test_gzip_content_encoding_with_a_body_that_is_not_gzip_is_415(
    server: ServiceProcess,
) -> None:
    async with NoToolRuns(server):
        body = json.dumps(call_tool({"text": "abc"})).encode()
        status, headers, text = await raw_post(server.url, body, [("Content-Encoding", b"gzip")])
    assert status == 415
    message = refusal(status, headers, text, INVALID_REQUEST)
    assert "Content-Encoding 'gzip' is not accepted" in message


async def test_a_nul_in_a_tool_argument_is_invalid_params(server: ServiceProcess) -> None:
    async with NoToolRuns(server):
        body = json.dumps(call_tool({"text": "a\u0000b"})).encode()
        status, headers, text = await raw_post(server.url, body)
    assert status == 400
    message = refusal(status, headers, text, INVALID_PARAMS)
    assert message.startswith("params.arguments.text") and "U+0000" in message


async def test_a_body_that_is_not_utf8_is_a_parse_error(server: ServiceProcess) -> None:
    async with NoToolRuns(server):
        body = json.dumps(call_tool({"text": "abc"})).encode().replace(b"abc", b"a\xffc")
        status, headers, text = await raw_post(server.url, body)
    assert status == 400
    assert "not valid UTF-8" in refusal(status, headers, text, PARSE_ERROR)


async def test_a_body_over_the_limit_is_413(server: ServiceProcess) -> None:
    async with NoToolRuns(server):
        body = json.dumps(call_tool({"text": "a" * MAX_BODY})).encode()
        status, headers, text = await raw_post(server.url, body)
    assert status == 413
    message = refusal(status, headers, text, INVALID_REQUEST)
    assert f"exceeds the limit of {MAX_BODY} bytes" in message


async def test_a_non_utf8_x_principal_is_not_a_500(server: ServiceProcess) -> None:
    # The MCP runtime reads no identity: the header is ignored and the call served.
    body = json.dumps(call_tool({"text": "abc"})).encode()
    status, _, text = await raw_post(server.url, body, [("X-Principal", b"al\xffce")])
    assert status == 200 and '"text":"ABC"' in text, text


async def test_a_get_stream_is_405_not_a_connection_held_open(server: ServiceProcess) -> None:
    # Stateless: the stream would never carry anything, only hold the connection.
    status, headers, text = await exchange(
        server.url, "GET", "/mcp", [("Accept", b"text/event-stream")]
    )
    assert status == 405 and headers["allow"] == "POST"
    assert "send requests with POST" in refusal(status, headers, text, INVALID_REQUEST)


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"[1]", "batched JSON-RPC messages are not accepted"),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', "JSON-RPC 2.0 message"),
        (b'{"jsonrpc": "2.0", "id": 1}', 'needs a "method"'),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', '"id" must be'),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 7}', '"method" must be'),
    ],
)
async def test_json_that_is_not_one_json_rpc_message_is_named_as_such(
    server: ServiceProcess, body: bytes, says: str
) -> None:
    # The SDK would answer with its validator's text; the guard says what is wrong.
    async with NoToolRuns(server):
        status, headers, text = await raw_post(server.url, body)
    assert status == 400
    assert says in refusal(status, headers, text, INVALID_REQUEST)


async def test_a_body_without_a_json_content_type_is_415_as_json_rpc(
    server: ServiceProcess,
) -> None:
    body = json.dumps(call_tool({"text": "abc"})).encode()
    async with NoToolRuns(server):
        status, headers, text = await exchange(
            server.url, "POST", "/mcp", [("Accept", b"application/json, text/event-stream")], body
        )
    assert status == 415
    assert "content type must be application/json" in refusal(
        status, headers, text, INVALID_REQUEST
    )
