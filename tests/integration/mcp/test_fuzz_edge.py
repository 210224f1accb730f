"""Hostile bytes at the MCP runtime's ``/mcp`` endpoint.

A real ``kaos-mcp`` serving one tool, ``note``, that appends a line to a file: the file's
line count is what a request changed. Each example is one mutated JSON-RPC request
(``tests.support.hostile``) over a raw socket: answered within the deadline (a body
shorter than its Content-Length within ``KAOS_HTTP_BODY_TIMEOUT``), never a 5xx, JSON (or
server-sent events of JSON) naming no Python exception; a request marked hostile refused
(a 4xx, a JSON-RPC error object, or a tool result marked ``isError``); and a refused
request ran no tool. After the run the runtime still answers its probes and runs the tool.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import example, given
from kaos_agent.mcp_runtime.settings import McpSettings

from tests.support.hostile import (
    SERVICE_ENV,
    Endpoint,
    Expect,
    HeaderCase,
    RawRequest,
    fuzz_settings,
    hostile_requests,
    issue_cases,
    run_one,
)
from tests.support.procs import ServiceProcess, console_script, free_port, start_service

MAX_BODY = 1024 * 1024
PROTOCOL = "2025-06-18"
HEADERS = (
    ("Content-Type", "application/json"),
    ("Accept", "application/json, text/event-stream"),
    ("MCP-Protocol-Version", PROTOCOL),
)
HEADER_CASES = (
    HeaderCase("Accept", b"text/html", Expect.REFUSE),
    HeaderCase("Accept", b"\xff", Expect.REFUSE),
    HeaderCase("MCP-Protocol-Version", b"1999-01-01", Expect.REFUSE),
    HeaderCase("MCP-Protocol-Version", b"\xff\xfe", Expect.REFUSE),
)


def _endpoint(method: str, params: dict[str, Any], **kw: Any) -> Endpoint:
    return Endpoint(
        name=f"mcp {method}",
        method="POST",
        path="/mcp",
        body={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers=HEADERS,
        jsonrpc=True,
        # A string, an integer or null are all ids.
        lenient=(("id",),),
        max_body=MAX_BODY,
        header_cases=HEADER_CASES,
        **kw,
    )


ENDPOINTS = [
    _endpoint("tools/call", {"name": "note", "arguments": {"text": "fuzz note"}}),
    _endpoint(
        "initialize",
        {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "0"},
        },
    ),
    _endpoint("tools/list", {}, nullable=(("params",),)),
]
ISSUE_CASES = issue_cases(ENDPOINTS)


@dataclass
class Runtime:
    proc: ServiceProcess
    notes: Path

    def noted(self) -> int:
        """Lines the tool has written so far."""
        return self.notes.read_bytes().count(b"\n") if self.notes.exists() else 0


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    root = tmp_path_factory.mktemp("mcp-fuzz")
    notes = root / "notes.txt"
    source = (
        "def note(text: str) -> str:\n"
        '    """Append the text as one line to the notes file."""\n'
        f"    with open({str(notes)!r}, 'a', encoding='utf-8', errors='replace') as f:\n"
        "        f.write(text.replace('\\n', ' ') + '\\n')\n"
        "    return 'noted'\n"
    )
    port = free_port()
    env = {
        **dict.fromkeys(McpSettings.env_names(), ""),
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "MCP_TOOLS_STRING": source,
        "MCP_MAX_BODY_BYTES": str(MAX_BODY),
        **SERVICE_ENV,
    }
    proc = start_service("mcp-fuzz", [console_script("kaos-mcp")], port=port, env=env, log_dir=root)
    try:
        yield Runtime(proc, notes)
    finally:
        proc.stop(timeout=15)


async def assert_healthy(rt: Runtime) -> None:
    assert rt.proc.alive(), rt.proc.log_tail()
    before = rt.noted()
    async with aiohttp.ClientSession() as http:
        for probe in ("/healthz", "/readyz"):
            async with http.get(rt.proc.url + probe) as resp:
                assert resp.status == 200, (probe, await resp.text())
        body = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "tools/call",
            "params": {"name": "note", "arguments": {"text": "still serving"}},
        }
        async with http.post(rt.proc.url + "/mcp", json=body, headers=dict(HEADERS)) as resp:
            assert resp.status == 200, await resp.text()
            text = await resp.text()
    data = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    assert data and data[-1]["result"]["content"][0]["text"] == "noted", text
    assert rt.noted() == before + 1


def test_hostile_requests_are_refused_cleanly(runtime: Runtime) -> None:
    sessions = itertools.count()

    @fuzz_settings(60)
    @given(req=hostile_requests(ENDPOINTS))
    def one(req: RawRequest) -> None:
        asyncio.run(
            run_one(
                runtime.proc.port, req, session=f"fuzz-{next(sessions)}", snapshot=runtime.noted
            )
        )

    for case in ISSUE_CASES:
        one = example(req=case)(one)
    one()
    asyncio.run(assert_healthy(runtime))
