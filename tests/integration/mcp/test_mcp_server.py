"""The python-string MCP server, spoken to by pydantic-ai's MCP client over streamable HTTP."""

from __future__ import annotations

import aiohttp
import pytest
from fastmcp.exceptions import ToolError
from pydantic_ai.mcp import MCPToolset

from tests.fixtures.agent import McpFactory

SOURCE = '''
def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()

def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b

def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"exploded: {reason}")
'''


async def test_pydantic_ai_client_lists_and_calls_tools(mcp_server_factory: McpFactory) -> None:
    server = mcp_server_factory(SOURCE)
    toolset: MCPToolset[None] = MCPToolset(server.url + "/mcp")
    async with toolset:
        tools = {t.name: t for t in await toolset.list_tools()}
        assert sorted(tools) == ["add", "explode", "shout"]
        assert tools["shout"].description == "Upper-case the text."
        assert tools["add"].input_schema["required"] == ["a", "b"]
        assert await toolset.direct_call_tool("shout", {"text": "abc"}) == "ABC"
        assert await toolset.direct_call_tool("add", {"a": 2, "b": 40}) == 42


async def test_tool_errors_are_tool_results_and_counted(mcp_server_factory: McpFactory) -> None:
    server = mcp_server_factory(SOURCE)
    toolset: MCPToolset[None] = MCPToolset(server.url + "/mcp", tool_error_behavior="error")
    async with toolset:
        # The server answered isError with the tool's own message.
        with pytest.raises(ToolError, match=r": explode failed: exploded: test$"):
            await toolset.direct_call_tool("explode", {"reason": "test"})
        assert await toolset.direct_call_tool("shout", {"text": "ok"}) == "OK"
    async with aiohttp.ClientSession() as http, http.get(server.url + "/metrics") as resp:
        text = await resp.text()
    assert 'kaos_mcp_tool_calls_total{outcome="error",tool="explode"} 1.0' in text
    assert 'kaos_mcp_tool_calls_total{outcome="ok",tool="shout"} 1.0' in text


async def test_in_cluster_host_header_is_accepted(mcp_server_factory: McpFactory) -> None:
    server = mcp_server_factory(SOURCE)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    headers = {
        "Host": "tools.default.svc.cluster.local:8000",
        "Accept": "application/json, text/event-stream",
    }
    async with (
        aiohttp.ClientSession() as http,
        http.post(server.url + "/mcp", json=body, headers=headers) as resp,
    ):
        assert resp.status == 200, await resp.text()


PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


async def test_host_allow_list_rejects_other_hosts(mcp_server_factory: McpFactory) -> None:
    server = mcp_server_factory(SOURCE, MCP_ALLOWED_HOSTS="tools:8000")
    headers = {"Host": "evil.example:8000", "Accept": "application/json, text/event-stream"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(server.url + "/mcp", json=PING, headers=headers) as resp,
    ):
        assert resp.status == 421


def test_sigterm_is_a_clean_exit(mcp_server_factory: McpFactory) -> None:
    """A graceful shutdown on SIGTERM exits 0, like the other KAOS services (a pod's
    termination is not reported as a kill)."""
    server = mcp_server_factory("def ping() -> str:\n    return 'pong'\n")
    assert server.stop(timeout=30) == 0
