"""One request as bytes on the wire, the endpoint it mutates, and what it must get."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.support.hostile.bounds import BODY_TIMEOUT, DEADLINE, STALL_SLACK
from tests.support.hostile.documents import Path, Pattern, dump


class Expect(enum.Enum):
    ACCEPT = "accept"  # a valid request: 2xx, and no JSON-RPC error
    REFUSE = "refuse"  # a 4xx (or, on a JSON-RPC endpoint, a JSON-RPC error object)
    ANY = "any"  # valid or not depending on the service's leniency: only no 5xx etc.
    STALL = "stall"  # the body never completes: 408, or the connection closed, in time


@dataclass(frozen=True)
class HeaderCase:
    """An endpoint-specific header value and what the endpoint must do with it."""

    name: str
    value: bytes
    expect: Expect


@dataclass(frozen=True)
class Endpoint:
    """One operation of a service, as a valid request and the rules it is refused by."""

    name: str
    method: str
    path: str
    body: Any  # a valid JSON document
    headers: tuple[tuple[str, str], ...]  # valid headers besides Host and Content-Length
    jsonrpc: bool = False  # refusals may be HTTP 200 with a JSON-RPC error object
    checks_content_type: bool = True  # a non-JSON Content-Type is refused
    forbids_unknown_fields: bool = False  # a key the wire model does not know is refused
    identity_headers: tuple[str, ...] = ()  # headers validated as identity (else ignored)
    # Subtrees where a value of another JSON type may be accepted (lax models), and
    # fields that may be null.
    lenient: tuple[Pattern, ...] = ()
    nullable: tuple[Pattern, ...] = ()
    max_body: int = 1024 * 1024
    header_cases: tuple[HeaderCase, ...] = ()
    # Places the issue put its deep nesting (besides the root), for the explicit cases.
    deep_paths: tuple[Path, ...] = ()


SESSION_PLACEHOLDER = "fuzz-session"


@dataclass(frozen=True)
class RawRequest:
    """One request as bytes on the wire, what it must get, and how it was made."""

    endpoint: Endpoint
    label: str
    expect: Expect
    method: str
    path: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    # The Content-Length header as sent; ``None``: the body's length (``b""``: no header).
    content_length: bytes | None = None
    # Not valid HTTP/1.1 (or at the edge of it): the server's HTTP parser may refuse it
    # with a 4xx of its own, in text, before any application code runs.
    malformed_http: bool = False

    def render(self, host: str, session: str) -> bytes:
        """The request bytes; header values equal to the placeholder get ``session``, so
        each example has a conversation of its own."""
        lines = [f"{self.method} {self.path} HTTP/1.1".encode(), b"Host: " + host.encode()]
        for name, value in self.headers:
            if value == SESSION_PLACEHOLDER.encode():
                value = session.encode()
            lines.append(name + b": " + value)
        if self.content_length is None:
            lines.append(b"Content-Length: " + str(len(self.body)).encode())
        elif self.content_length != b"":
            lines.append(b"Content-Length: " + self.content_length)
        lines.append(b"Connection: close")
        return b"\r\n".join(lines) + b"\r\n\r\n" + self.body

    def reproducer(self, limit: int = 600) -> str:
        """The request as a Python bytes literal (long bodies elided), for failure reports."""
        raw = self.render("127.0.0.1:PORT", SESSION_PLACEHOLDER)
        shown = repr(raw[:limit]) + (f" ... ({len(raw)} bytes)" if len(raw) > limit else "")
        return f"{self.summary()}\n{shown}"

    def summary(self) -> str:
        http = ", or an HTTP-level 4xx" if self.malformed_http else ""
        return f"[{self.endpoint.name}: {self.label}; expect {self.expect.value}{http}]"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        # How Hypothesis shows a failing example: the request, not the dataclass fields.
        printer.text(self.summary())

    @property
    def deadline(self) -> float:
        return BODY_TIMEOUT + STALL_SLACK if self.expect is Expect.STALL else DEADLINE


# --- building requests --------------------------------------------------------------------


def request(
    ep: Endpoint,
    label: str,
    expect: Expect,
    *,
    body: bytes | None = None,
    headers: Sequence[tuple[bytes, bytes]] | None = None,
    method: str | None = None,
    content_length: bytes | None = None,
    malformed_http: bool = False,
) -> RawRequest:
    return RawRequest(
        endpoint=ep,
        label=label,
        expect=expect,
        method=method or ep.method,
        path=ep.path,
        headers=tuple(
            headers if headers is not None else [(n.encode(), v.encode()) for n, v in ep.headers]
        ),
        body=dump(ep.body) if body is None else body,
        content_length=content_length,
        malformed_http=malformed_http,
    )


def _headers(ep: Endpoint, *, drop: Sequence[str] = ()) -> list[tuple[bytes, bytes]]:
    lowered = {d.lower() for d in drop}
    return [(n.encode(), v.encode()) for n, v in ep.headers if n.lower() not in lowered]


def _refuse_or_any(refused: bool) -> Expect:
    return Expect.REFUSE if refused else Expect.ANY
