"""A raw HTTP/1.1 client over a plain socket: what aiohttp's client would normalise or
refuse to send goes out as it is, and the first answer is read within a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from tests.support.hostile.request import Expect, RawRequest


@dataclass
class Exchange:
    """What came back for one request."""

    request: RawRequest
    status: int = 0  # 0: the connection closed (or was reset) before a status line
    reason: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    elapsed: float = 0.0
    hung: bool = False
    note: str = ""

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None

    def documents(self) -> list[Any]:
        """The JSON documents of the body: one, or one per server-sent event's ``data``.

        Raises ``ValueError`` for a body that is neither."""
        ctype = (self.header("Content-Type") or "").split(";")[0].strip().lower()
        if ctype == "text/event-stream":
            docs = []
            for line in self.body.decode("utf-8").splitlines():
                if line.startswith("data:"):
                    data = line[5:].strip()
                    if data and data != "[DONE]":
                        docs.append(json.loads(data))
            return docs
        if not self.body:
            return []
        return [json.loads(self.body.decode("utf-8"))]

    def describe(self) -> str:
        shown = self.body[:400]
        return (
            f"{self.request.reproducer()}\n-> status {self.status} {self.reason} in "
            f"{self.elapsed:.2f}s{' (HUNG)' if self.hung else ''} {self.note}\n"
            f"   headers {self.headers}\n   body {shown!r}"
        )


async def _write(sock: socket.socket, data: bytes, stall: bool) -> None:
    loop = asyncio.get_running_loop()
    with contextlib.suppress(OSError):  # the server may stop reading: its answer still counts
        for i in range(0, len(data), 65536):
            await loop.sock_sendall(sock, data[i : i + 65536])
        if stall:
            await asyncio.Event().wait()  # keep the connection open, sending nothing more


class _Incomplete(Exception):
    """The buffer does not hold a whole answer yet."""


def _parse_response(buf: bytes, ex: Exchange, *, eof: bool) -> None:
    """Fill ``ex`` from the first answer in ``buf``; ``_Incomplete`` if it is not all there."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        raise _Incomplete
    lines = buf[:end].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status, reason = int(parts[1]), (parts[2] if len(parts) > 2 else "")
    headers = [
        (name.strip(), value.strip())
        for name, value in (line.split(":", 1) for line in lines[1:] if ":" in line)
    ]
    found = {name.lower(): value for name, value in headers}
    rest = buf[end + 4 :]
    if found.get("transfer-encoding", "").lower() == "chunked":
        chunks = []
        while True:
            line_end = rest.find(b"\r\n")
            if line_end < 0:
                raise _Incomplete
            size = int(rest[:line_end].split(b";")[0].strip(), 16)
            if size == 0:
                break
            if len(rest) < line_end + 2 + size + 2:
                raise _Incomplete
            chunks.append(rest[line_end + 2 : line_end + 2 + size])
            rest = rest[line_end + 2 + size + 2 :]
        body = b"".join(chunks)
    elif "content-length" in found:
        length = int(found["content-length"])
        if len(rest) < length:
            raise _Incomplete
        body = rest[:length]
    elif eof:
        body = rest
    else:
        raise _Incomplete
    ex.status, ex.reason, ex.headers, ex.body = status, reason, headers, body


async def _read_response(sock: socket.socket, ex: Exchange) -> None:
    loop = asyncio.get_running_loop()
    buf = b""
    while True:
        try:
            data = await loop.sock_recv(sock, 1 << 16)
        except ConnectionResetError:
            data = b""
            ex.note = "connection reset"
        try:
            _parse_response(buf + data, ex, eof=not data)
            return
        except _Incomplete:
            if not data:
                ex.note = ex.note or f"connection closed after {len(buf)} bytes of the answer"
                return
        buf += data


async def send(port: int, req: RawRequest, *, session: str, host: str = "127.0.0.1") -> Exchange:
    """Send ``req`` on a fresh connection and read the first answer, within its deadline.

    Plain non-blocking sockets rather than asyncio streams: a server that answers before it
    has read the whole body (a 413) and closes makes the sending side fail, and a stream
    transport would then drop the answer that already arrived."""
    ex = Exchange(request=req)
    raw = req.render(f"{host}:{port}", session)
    loop = asyncio.get_running_loop()
    started = time.monotonic()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setblocking(False)
        await loop.sock_connect(sock, (host, port))
        sending = asyncio.create_task(_write(sock, raw, req.expect is Expect.STALL))
        try:
            async with asyncio.timeout(req.deadline):
                await _read_response(sock, ex)
        except TimeoutError:
            ex.hung = True
        finally:
            ex.elapsed = time.monotonic() - started
            sending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sending
    return ex
