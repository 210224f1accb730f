"""One HTTP/1.1 request as raw bytes on a fresh connection.

aiohttp's client normalises (or refuses to send) exactly what the edge tests send:
repeated identity headers, header values with non-UTF-8 bytes, bodies that claim an
encoding. Every answer read here is checked for a leaked exception name.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tests.support.leaks import find_leak

# A header as sent: its name, and its value as raw bytes (repeats are kept).
Header = tuple[str, bytes]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  # lower-case names
    text: str

    def __iter__(self) -> Iterator[Any]:
        """``status, headers, text = await exchange(...)``."""
        return iter((self.status, self.headers, self.text))

    def json(self) -> dict[str, Any]:
        doc = json.loads(self.text)
        assert isinstance(doc, dict), self.text
        return doc


def _dechunk(payload: bytes) -> bytes:
    out = bytearray()
    while payload:
        size_line, _, payload = payload.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += payload[:size]
        payload = payload[size + 2 :]
    return bytes(out)


async def exchange(
    url: str, method: str, path: str, headers: list[Header], body: bytes = b""
) -> Answer:
    """Send exactly ``headers`` (plus Host, Content-Length for a POST and Connection:
    close) and read the answer until the server closes."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    head = [f"{method} {path} HTTP/1.1".encode(), f"Host: {parts.netloc}".encode()]
    head += [name.encode() + b": " + value for name, value in headers]
    if method == "POST":
        head.append(f"Content-Length: {len(body)}".encode())
    head.append(b"Connection: close")
    async with asyncio.timeout(60):
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        try:
            writer.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
            await writer.drain()
            raw = await reader.read()  # the server closes after answering
        finally:
            writer.close()
    head_bytes, _, payload = raw.partition(b"\r\n\r\n")
    status_line, *header_lines = head_bytes.decode("latin-1").split("\r\n")
    got = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    if got.get("transfer-encoding") == "chunked":
        payload = _dechunk(payload)
    text = payload.decode()
    leak = find_leak(text)
    assert leak is None, f"the answer names {leak!r}: {text}"
    return Answer(int(status_line.split()[1]), got, text)


async def post_json(
    url: str, path: str, body: bytes, headers: list[Header]
) -> tuple[int, dict[str, Any]]:
    """POST ``body`` with exactly ``headers``; the status and the JSON object answered."""
    answer = await exchange(url, "POST", path, headers, body)
    return answer.status, answer.json()
