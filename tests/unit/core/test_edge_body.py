"""The edge step's refusals that close the connection still reach the client as answers.

A body that does not arrive in time is answered 408, and a declared ``Content-Length``
over the limit 413 before any of the body is read; both say ``Connection: close`` (the
rest of the body may still be in flight) and come as the JSON error shape.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from kaos_core.errors import KaosError
from kaos_core.http import create_base_app
from kaos_core.http.body import decode_json, read_json_object
from kaos_core.http.limits import HttpLimits
from kaos_core.telemetry.settings import TelemetrySettings

from tests.support.loopback import served

BODY_TIMEOUT = 0.5


async def _echo(request: web.Request) -> web.Response:
    return web.json_response(await read_json_object(request))


@pytest.fixture
async def port() -> AsyncIterator[int]:
    limits = HttpLimits(body_timeout=BODY_TIMEOUT)
    app = create_base_app("demo", limits=limits, telemetry=TelemetrySettings(), max_body_bytes=1024)
    app.router.add_post("/echo", _echo)
    async with served(app) as port:
        yield port


async def _answer(port: int, head: bytes, body: bytes) -> tuple[int, dict[str, str], object]:
    """Send ``head`` and ``body`` and read one answer (by its Content-Length)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + body)
        await writer.drain()
        async with asyncio.timeout(10):
            status_line = await reader.readline()
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            payload = await reader.readexactly(int(headers["content-length"]))
    finally:
        writer.close()
    return int(status_line.split()[1]), headers, json.loads(payload)


def _head(length: int) -> bytes:
    return (
        b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: " + str(length).encode() + b"\r\n\r\n"
    )


async def test_a_stalled_body_is_answered_408_and_the_connection_closed(port: int) -> None:
    status, headers, doc = await _answer(port, _head(84), b'{"n": 1')  # 77 bytes short
    assert status == 408
    assert headers["connection"] == "close"
    assert isinstance(doc, dict) and doc["error"]["code"] == "request_timeout"
    assert f"within {BODY_TIMEOUT:g} s" in doc["error"]["message"]


async def test_a_declared_length_over_the_limit_is_413_before_the_body(port: int) -> None:
    # Nothing of the (10^12 byte) body is sent: the answer cannot wait for it.
    status, headers, doc = await _answer(port, _head(10**12), b"")
    assert status == 413
    assert headers["connection"] == "close"
    assert isinstance(doc, dict) and doc["error"]["code"] == "payload_too_large"


async def test_a_body_that_arrives_in_parts_is_read_whole(port: int) -> None:
    body = json.dumps({"text": "x" * 200}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(_head(len(body)) + body[:50])
        await writer.drain()
        # Sent apart: the handler may start before the rest is there, and must wait for it.
        writer.write(body[50:])
        await writer.drain()
        async with asyncio.timeout(10):
            assert (await reader.readline()).split()[1] == b"200"
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length"):
                    length = int(line.split(b":")[1])
            assert json.loads(await reader.readexactly(length)) == {"text": "x" * 200}
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"a": "x\\u0001y"}', "invalid_text"),
        (b'{"k\\b": "x"}', "invalid_text"),  # a short escape of a control character
        (b'{"a": "x\\fy"}', "invalid_text"),
        (b'{"a\\u0000": 1}', "invalid_text"),
        (b'{"a": ["ok", {"b": "\\ud800"}]}', "invalid_text"),
        (b'{"a": "x\x01y"}', "malformed_json"),  # raw: the parser's own refusal
    ],
)
def test_text_that_cannot_be_stored_is_refused_however_it_is_written(raw: bytes, code: str) -> None:
    with pytest.raises(KaosError) as refused:
        decode_json(raw)
    assert refused.value.code == code


def test_escapes_that_make_storable_text_are_decoded() -> None:
    doc = decode_json(b'{"a": "caf\\u00e9\\t\\n", "b": "\\ud83d\\ude00", "c": "plain"}')
    assert doc == {"a": "café\t\n", "b": "😀", "c": "plain"}
