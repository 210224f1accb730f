"""kaos_operator.tools: MCP's streamable HTTP as the operator speaks it, against servers
that answer in JSON with a session and pages (an aiohttp app on loopback) and in
server-sent events (a real kaos-mcp: tests/integration/operator/test_mcp_runtimes.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from kaos_operator.tools import McpError, _answer, list_tool_names

from tests.support.loopback import served


def test_an_event_stream_answer_skips_other_messages() -> None:
    body = (
        'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress"}\n\n'
        'event: message\r\ndata: {"jsonrpc":"2.0","id":3,"result":{"tools":[]}}\r\n\r\n'
    )
    assert _answer(body, "text/event-stream", 3) == {"tools": []}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}', "JSON-RPC error -32601"),
        ('{"jsonrpc":"2.0","id":2,"result":{}}', "no response to request 1"),
        ('{"jsonrpc":"2.0","id":1,"result":[]}', "a response without a result"),
    ],
)
def test_bad_answers_are_errors(body: str, message: str) -> None:
    with pytest.raises(McpError, match=message):
        _answer(body, "application/json", 1)


@pytest.fixture
async def paging_server() -> AsyncIterator[tuple[str, list[Any]]]:
    """A stateful MCP server answering in JSON: a session id, two pages of tools."""
    seen: list[Any] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.method == "DELETE":
            seen.append(("DELETE", request.headers.get("Mcp-Session-Id")))
            return web.Response(status=200)
        message = await request.json()
        seen.append(
            (
                message.get("method"),
                request.headers.get("Mcp-Session-Id"),
                request.headers.get("MCP-Protocol-Version"),
                message.get("params"),
            )
        )
        if "id" not in message:
            return web.Response(status=202)
        if message["method"] == "initialize":
            result: dict[str, Any] = {"protocolVersion": "2025-03-26", "capabilities": {}}
            headers = {"Mcp-Session-Id": "s-1"}
        elif (message.get("params") or {}).get("cursor") == "p2":
            result, headers = {"tools": [{"name": "third"}]}, {}
        else:
            result = {"tools": [{"name": "first"}, {"name": "second"}], "nextCursor": "p2"}
            headers = {}
        body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        return web.json_response(body, headers=headers)

    app = web.Application()
    app.router.add_route("*", "/mcp", handle)
    async with served(app) as port:
        yield f"http://127.0.0.1:{port}/mcp", seen


async def test_session_version_and_pages(paging_server: tuple[str, list[Any]]) -> None:
    url, seen = paging_server
    assert await list_tool_names(url) == ["first", "second", "third"]
    assert seen[0][0] == "initialize" and seen[0][1] is None
    assert seen[0][3]["protocolVersion"] == "2025-06-18"
    # After initialize: the server's session and the version it chose, on every message.
    assert [s[:3] for s in seen[1:4]] == [
        ("notifications/initialized", "s-1", "2025-03-26"),
        ("tools/list", "s-1", "2025-03-26"),
        ("tools/list", "s-1", "2025-03-26"),
    ]
    assert seen[3][3] == {"cursor": "p2"}
    assert seen[4] == ("DELETE", "s-1")
