"""The tools an MCP server offers, read over MCP itself: initialize, then tools/list.

The operator asks once a server's Deployment is available and reports the names in the
MCPServer's ``status.availableTools``, so ``kubectl get mcpserver -o yaml`` shows what an
agent bound to it will be offered. Three JSON-RPC messages over MCP's streamable HTTP
transport (spec 2025-06-18: a POST per message, the answer as JSON or as server-sent
events, the session and protocol version echoed in headers), on the aiohttp the
operator already runs on: the official ``mcp`` package would bring its server stack
(starlette, uvicorn and, through it, click) into the operator image for three requests.
The agents keep using the official client; the tests read a real kaos-mcp with this one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from kaos_core.tracing import client_session
from kaos_core.wire import AGENT_TOKEN_HEADER

# The endpoint's URL, and the token to present (``X-Agent-Token``) or None.
ToolLister = Callable[[str, str | None], Awaitable[list[str]]]

PROTOCOL_VERSION = "2025-06-18"
LIST_TIMEOUT = 10.0
# Pages of tools/list followed at most: a server that keeps paging is cut off here.
MAX_PAGES = 20
# A tools/list answer larger than this is not read (a status holds names, not schemas).
MAX_BODY = 4 * 1024 * 1024
SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"


class McpError(Exception):
    """The server answered, but not with what MCP says (the message says what)."""


def _answer(body: str, content_type: str, request_id: int) -> dict[str, Any]:
    """The JSON-RPC response to ``request_id`` in a JSON or server-sent-events body."""
    if content_type.startswith("text/event-stream"):
        messages = []
        for event in body.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(
                line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")
            )
            if data:
                messages.append(json.loads(data))
    else:
        parsed = json.loads(body)
        messages = parsed if isinstance(parsed, list) else [parsed]
    for message in messages:
        if isinstance(message, dict) and message.get("id") == request_id:
            if "error" in message:
                raise McpError(f"JSON-RPC error {message['error'].get('code')}")
            result = message.get("result")
            if not isinstance(result, dict):
                raise McpError("a response without a result")
            return result
    raise McpError(f"no response to request {request_id}")


class _Session:
    def __init__(self, http: aiohttp.ClientSession, url: str, token: str | None) -> None:
        self._http = http
        self._url = url
        self._headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
        }
        if token is not None:
            self._headers[AGENT_TOKEN_HEADER] = token
        self._next_id = 0

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        async with self._http.post(self._url, json=message, headers=self._headers) as resp:
            if resp.status != 200:
                raise McpError(f"{method}: HTTP {resp.status}")
            if (session := resp.headers.get(SESSION_HEADER)) is not None:
                self._headers[SESSION_HEADER] = session
            body = bytearray()
            async for chunk in resp.content.iter_any():
                body += chunk
                if len(body) > MAX_BODY:
                    raise McpError(f"{method}: answer larger than {MAX_BODY} bytes")
            return _answer(body.decode(), resp.content_type, self._next_id)

    async def notify(self, method: str) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        async with self._http.post(self._url, json=message, headers=self._headers) as resp:
            if resp.status not in (200, 202):
                raise McpError(f"{method}: HTTP {resp.status}")

    def negotiated(self, version: str) -> None:
        self._headers[VERSION_HEADER] = version

    async def close(self) -> None:
        """End the server's session, if it made one (best effort, as the spec allows)."""
        if SESSION_HEADER in self._headers:
            try:
                async with self._http.delete(self._url, headers=self._headers):
                    pass
            except aiohttp.ClientError:
                pass


async def list_tool_names(url: str, token: str | None = None) -> list[str]:
    """Names of the tools of the streamable-HTTP MCP server at ``url``, in its order,
    within ``LIST_TIMEOUT`` seconds; ``token`` (the operator's of audience
    ``kaos.dev/mcp``) is presented to a server that verifies its callers.

    Raises ``McpError``, ``aiohttp.ClientError``, ``ValueError`` (a body that is not
    JSON) or ``TimeoutError``; the caller reports the class.
    """
    names: list[str] = []
    async with asyncio.timeout(LIST_TIMEOUT), client_session() as http:
        session = _Session(http, url, token)
        try:
            init = await session.request(
                "initialize",
                {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "kaos-operator", "version": "1"},
                },
            )
            session.negotiated(str(init.get("protocolVersion") or PROTOCOL_VERSION))
            await session.notify("notifications/initialized")
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                page = await session.request("tools/list", {"cursor": cursor} if cursor else {})
                names += [str(t["name"]) for t in page.get("tools") or [] if "name" in t]
                cursor = page.get("nextCursor")
                if not cursor:
                    break
        finally:
            await session.close()
    return names
