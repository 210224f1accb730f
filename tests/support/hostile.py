"""Hostile HTTP requests at the byte level, and a raw client that sends them.

Schemathesis (``tests/unit/*/test_schemathesis.py``) sends requests an HTTP client can
express; what it never sends is what issue 22 found: JSON nested a thousand deep,
4,301-digit integers, a ``Content-Encoding: gzip`` claim on a plain body, identity
headers carrying control characters, non-UTF-8 bytes or given twice, NUL characters,
lone surrogates, truncated and oversize bodies, bodies shorter than their
``Content-Length``. The strategies here start from valid requests of a service (an
``Endpoint``) and apply one mutation; each ``RawRequest`` says what the service must do
with it (``Expect``). They go out over a plain socket, because aiohttp's client
normalises (or refuses to send) exactly the headers worth testing.

``check_exchange`` asserts the per-request properties every service shares: an answer
within the deadline, no 5xx, an error body that is JSON in the service's error shape and
names no Python exception, and a refusal for a request the generator marked hostile. A
request that is not valid HTTP/1.1 (a control byte in a header, a malformed
Content-Length or chunk size) may instead get the HTTP parser's own 4xx, which is text:
no application code has run. ``run_one`` adds the service's "no write" check.

Bounded by default (CI runs the same derandomized examples every time); a deeper local
hunt: ``KAOS_FUZZ_MAX_EXAMPLES=500 KAOS_FUZZ_RANDOM=1 pytest tests/unit/*/test_fuzz_edge.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import enum
import gzip
import json
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from tests.support.leaks import LEAK_RE

# --- bounds -------------------------------------------------------------------------------

_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
RANDOM = os.environ.get("KAOS_FUZZ_RANDOM", "") not in ("", "0")
_MAX_EXAMPLES = os.environ.get("KAOS_FUZZ_MAX_EXAMPLES", "")
# The body timeout the services under test run with (``KAOS_HTTP_BODY_TIMEOUT``): a body
# shorter than its Content-Length must be answered (408) or dropped within it.
BODY_TIMEOUT = 2.0
# No answer within this many seconds is a hang.
DEADLINE = float(os.environ.get("KAOS_FUZZ_DEADLINE") or 8.0)
# Slack on top of the body timeout for a stalled body's answer.
STALL_SLACK = 3.0
SERVICE_ENV = {"KAOS_HTTP_BODY_TIMEOUT": f"{BODY_TIMEOUT:g}"}


def max_examples(default: int) -> int:
    """``KAOS_FUZZ_MAX_EXAMPLES`` when set, else the module's modest default."""
    return int(_MAX_EXAMPLES) if _MAX_EXAMPLES else default


def fuzz_settings(default_examples: int) -> settings:
    """Bounded, derandomized unless ``KAOS_FUZZ_RANDOM`` (never in CI), no example database.

    CI does not shrink: a failure is reported with the example as generated, before the
    test's timeout could cut the report off; locally a failure shrinks to a minimal one.
    """
    phases = [Phase.explicit, Phase.generate]
    if not _CI:
        phases.append(Phase.shrink)
    return settings(
        max_examples=max_examples(default_examples),
        deadline=None,
        derandomize=_CI or not RANDOM,
        database=None,
        phases=phases,
        print_blob=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.function_scoped_fixture,
        ],
    )


# --- what a request must get --------------------------------------------------------------


class Expect(enum.Enum):
    ACCEPT = "accept"  # a valid request: 2xx, and no JSON-RPC error
    REFUSE = "refuse"  # a 4xx (or, on a JSON-RPC endpoint, a JSON-RPC error object)
    ANY = "any"  # valid or not depending on the service's leniency: only no 5xx etc.
    STALL = "stall"  # the body never completes: 408, or the connection closed, in time


Path = tuple[str | int, ...]
# A path pattern: "*" matches any key or index.
Pattern = tuple[str | int, ...]


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


# --- documents ----------------------------------------------------------------------------

_SLOT = "@@kaos-fuzz-slot@@"
_SLOT_TOKEN = json.dumps(_SLOT).encode()


def walk(doc: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every node of a document with its path, the root first."""
    yield path, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from walk(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from walk(value, (*path, i))


def value_paths(doc: Any) -> list[Path]:
    return [p for p, _ in walk(doc)]


def string_paths(doc: Any) -> list[Path]:
    return [p for p, v in walk(doc) if isinstance(v, str)]


def object_paths(doc: Any) -> list[Path]:
    return [p for p, v in walk(doc) if isinstance(v, dict)]


def get_at(doc: Any, path: Path) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def set_at(doc: Any, path: Path, value: Any) -> Any:
    """A copy of ``doc`` with ``value`` at ``path`` (the root: ``value`` itself)."""
    if not path:
        return value
    out = copy.deepcopy(doc)
    get_at(out, path[:-1])[path[-1]] = value
    return out


def matches(path: Path, pattern: Pattern) -> bool:
    """``path`` lies in the subtree ``pattern`` names."""
    return len(path) >= len(pattern) and all(
        p == "*" or p == step for p, step in zip(pattern, path, strict=False)
    )


def dump(doc: Any) -> bytes:
    return json.dumps(doc, ensure_ascii=False).encode()


def with_token(doc: Any, path: Path, token: bytes) -> bytes:
    """The document's bytes with the raw ``token`` (any bytes) as the value at ``path``."""
    rendered = dump(set_at(doc, path, _SLOT))
    assert rendered.count(_SLOT_TOKEN) == 1
    return rendered.replace(_SLOT_TOKEN, token)


def with_key_token(doc: Any, path: Path, key: str | None, token: bytes) -> bytes:
    """The document's bytes with the object at ``path`` holding an extra (or, with ``key``,
    a renamed) key whose raw bytes are ``token``."""
    obj = get_at(doc, path)
    assert isinstance(obj, dict)
    if key is None:
        new = {**obj, _SLOT: "x"}
    else:
        new = {(_SLOT if k == key else k): v for k, v in obj.items()}
    rendered = dump(set_at(doc, path, new))
    assert rendered.count(_SLOT_TOKEN) == 1
    return rendered.replace(_SLOT_TOKEN, token)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


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


def valid(ep: Endpoint) -> RawRequest:
    return request(ep, "valid", Expect.ACCEPT)


def deep_nesting(ep: Endpoint, path: Path, depth: int, shape: str = "array") -> RawRequest:
    if shape == "array":
        token = b"[" * depth + b"]" * depth
    else:
        token = b'{"a":' * depth + b"1" + b"}" * depth
    body = with_token(ep.body, path, token)
    return request(ep, f"{shape} nested {depth} deep at {_where(path)}", Expect.REFUSE, body=body)


HUGE_NUMBERS: tuple[str, ...] = ("int", "negative", "fraction", "exponent", "overflow")


def huge_number(ep: Endpoint, path: Path, digits: int, kind: str = "int") -> RawRequest:
    many = b"1" + b"0" * max(digits - 1, 0)
    token = {
        "int": many,
        "negative": b"-" + many,
        "fraction": b"0." + many,
        "exponent": b"1e" + many,
        "overflow": b"1e" + str(400 + digits).encode(),  # short, but not a finite double
    }[kind]
    body = with_token(ep.body, path, token)
    return request(
        ep, f"{kind} number of {len(token)} chars at {_where(path)}", Expect.REFUSE, body=body
    )


def non_finite(ep: Endpoint, path: Path, literal: str) -> RawRequest:
    body = with_token(ep.body, path, literal.encode())
    return request(ep, f"{literal} at {_where(path)}", Expect.REFUSE, body=body)


def duplicate_key(ep: Endpoint, path: Path, key: str | None, value: Any) -> RawRequest:
    """The object at ``path`` with a key given twice: an existing one, or a new one."""
    obj = get_at(ep.body, path)
    assert isinstance(obj, dict)
    second = _SLOT + "-2"
    if key is None or key not in obj:
        key = "dup"
        new = {**obj, _SLOT: value, second: value}
    else:
        new = {**obj, _SLOT: value}
    rendered = dump(set_at(ep.body, path, new))
    name = json.dumps(key).encode()
    rendered = rendered.replace(_SLOT_TOKEN, name).replace(json.dumps(second).encode(), name)
    return request(ep, f"key {key!r} twice in {_where(path)}", Expect.REFUSE, body=rendered)


CONTROL_CHARS = tuple(chr(c) for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20)])


def control_text(ep: Endpoint, path: Path, char: str, raw: bool = False) -> RawRequest:
    """A string with a C0 control character: escaped (``\\u0000``, valid JSON that cannot be
    stored) or raw (not JSON)."""
    text = "before" + char + "after"
    token = b'"' + text.encode() + b'"' if raw else json.dumps(text).encode()
    body = with_token(ep.body, path, token)
    how = "raw" if raw else "escaped"
    return request(ep, f"{how} U+{ord(char):04X} in {_where(path)}", Expect.REFUSE, body=body)


def control_key(ep: Endpoint, path: Path, char: str) -> RawRequest:
    body = with_key_token(ep.body, path, None, json.dumps("k" + char).encode())
    return request(ep, f"key with U+{ord(char):04X} in {_where(path)}", Expect.REFUSE, body=body)


SURROGATES: tuple[tuple[str, bool], ...] = (
    ("\\ud800", True),
    ("x\\udfffy", True),
    ("\\udc80\\ud800", True),
    ("\\ud83d", True),
    ("\\ud83d\\ude00", False),  # a proper pair: an emoji, storable
)


def surrogate(ep: Endpoint, path: Path, escape: str, lone: bool, key: bool = False) -> RawRequest:
    token = b'"' + escape.encode() + b'"'
    if key:
        body = with_key_token(ep.body, path, None, token)
        expect = Expect.REFUSE if lone else _refuse_or_any(ep.forbids_unknown_fields)
    else:
        body = with_token(ep.body, path, token)
        # A valid pair is ordinary text, accepted where text is.
        expect = Expect.REFUSE if lone else Expect.ANY
    where = ("key in " if key else "") + _where(path)
    return request(ep, f"{escape} at {where}", expect, body=body)


INVALID_UTF8: tuple[bytes, ...] = (
    b"\xff",
    b"\x80",
    b"\xc3\x28",
    b"\xc0\xaf",  # overlong "/"
    b"\xed\xa0\x80",  # a surrogate, UTF-8 encoded
    b"\xe2\x82",  # truncated sequence
    b"\xf8\x88\x80\x80\x80",
    b"\xf4\x90\x80\x80",  # beyond U+10FFFF
)


def invalid_utf8(ep: Endpoint, path: Path, junk: bytes) -> RawRequest:
    body = with_token(ep.body, path, b'"a' + junk + b'z"')
    return request(ep, f"bytes {junk!r} in {_where(path)}", Expect.REFUSE, body=body)


def other_encoding(ep: Endpoint, codec: str) -> RawRequest:
    """The whole body in UTF-16/32, or UTF-8 behind a byte-order mark."""
    text = json.dumps(ep.body, ensure_ascii=False)
    body = text.encode(codec)
    return request(ep, f"body encoded {codec}", Expect.REFUSE, body=body)


def truncated(ep: Endpoint, keep: int) -> RawRequest:
    full = dump(ep.body)
    keep = min(keep, len(full) - 1)
    return request(ep, f"body cut to {keep} of {len(full)} bytes", Expect.REFUSE, body=full[:keep])


WRONG_VALUES: tuple[Any, ...] = (0, -1, 1.5, True, False, None, "", "x", [], [1], {}, {"x": 1})


def wrong_type(ep: Endpoint, path: Path, value: Any) -> RawRequest:
    original = get_at(ep.body, path)
    assert json_type(value) != json_type(original)
    lenient = any(matches(path, p) for p in ep.lenient) or (
        value is None and any(matches(path, p) for p in ep.nullable)
    )
    body = dump(set_at(ep.body, path, value))
    label = f"{json_type(value)} {value!r} for {json_type(original)} at {_where(path)}"
    return request(ep, label, Expect.ANY if lenient else Expect.REFUSE, body=body)


NOT_OBJECTS: tuple[bytes, ...] = (
    b"",
    b" ",
    b"null",
    b"[]",
    b"[{}]",
    b'"text"',
    b"1",
    b"true",
    b"{",
    b"}",
    b"{}{}",
    b"<xml/>",
    b"a=1&b=2",
    b"\x00\x00\x00",
)


def not_an_object(ep: Endpoint, body: bytes) -> RawRequest:
    # ``{}`` is an object, but lacks what every endpoint requires.
    return request(ep, f"body {body!r}", Expect.REFUSE, body=body)


UNKNOWN_FIELDS: tuple[str, ...] = ("zz_extra", "principal", "user_id", "session_id", "__proto__")


def unknown_field(ep: Endpoint, path: Path, name: str) -> RawRequest:
    obj = get_at(ep.body, path)
    assert isinstance(obj, dict)
    body = dump(set_at(ep.body, path, {**obj, name: "x"}))
    return request(
        ep,
        f"unknown field {name!r} in {_where(path)}",
        _refuse_or_any(ep.forbids_unknown_fields),
        body=body,
    )


def oversize(ep: Endpoint, path: Path, extra: int) -> RawRequest:
    """A valid document over the endpoint's body limit (a long string at ``path``)."""
    base = len(dump(set_at(ep.body, path, "")))
    filler = "x" * (ep.max_body - base + 1 + extra)
    body = dump(set_at(ep.body, path, filler))
    return request(ep, f"{len(body)}-byte body (limit {ep.max_body})", Expect.REFUSE, body=body)


ENCODINGS: tuple[str, ...] = ("gzip", "deflate", "br", "x-gzip", "zstd", "GZIP", "gzip, identity")


def content_encoding(ep: Endpoint, encoding: str, payload: str) -> RawRequest:
    """A ``Content-Encoding`` the servers do not decode, on a plain, junk or gzip body."""
    plain = dump(ep.body)
    body = {"plain": plain, "junk": b"\x1f\x8b\x08junk", "gzip": gzip.compress(plain)}[payload]
    headers = [*_headers(ep), (b"Content-Encoding", encoding.encode())]
    return request(
        ep,
        f"Content-Encoding {encoding} on a {payload} body",
        Expect.REFUSE,
        body=body,
        headers=headers,
    )


def content_encoding_twice(ep: Endpoint) -> RawRequest:
    headers = [
        *_headers(ep),
        (b"Content-Encoding", b"identity"),
        (b"Content-Encoding", b"identity"),
    ]
    return request(ep, "Content-Encoding identity given twice", Expect.REFUSE, headers=headers)


def content_encoding_identity(ep: Endpoint) -> RawRequest:
    headers = [*_headers(ep), (b"Content-Encoding", b"identity")]
    return request(ep, "Content-Encoding identity", Expect.ANY, headers=headers)


# (value or None for no header, refused where the content type is checked)
CONTENT_TYPES: tuple[tuple[bytes | None, bool], ...] = (
    (None, True),
    (b"", True),
    (b"text/plain", True),
    (b"application/x-www-form-urlencoded", True),
    (b"multipart/form-data; boundary=x", True),
    (b"application/jsonx", True),
    (b"application/xml", True),
    (b"application/json; charset=utf-8", False),
    (b"APPLICATION/JSON", False),
)


def content_type(ep: Endpoint, value: bytes | None, refused: bool) -> RawRequest:
    headers = _headers(ep, drop=["Content-Type"])
    if value is not None:
        headers.append((b"Content-Type", value))
    expect = _refuse_or_any(refused and ep.checks_content_type)
    label = "no Content-Type" if value is None else f"Content-Type {value!r}"
    return request(ep, label, expect, headers=headers)


def short_body(ep: Endpoint, missing: int) -> RawRequest:
    """Fewer bytes than the Content-Length promises: the server must not wait forever."""
    body = dump(ep.body)
    declared = str(len(body) + missing).encode()
    return request(
        ep, f"Content-Length {len(body)}+{missing}", Expect.STALL, content_length=declared
    )


def long_body(ep: Endpoint, cut: int) -> RawRequest:
    """More bytes than the Content-Length: the declared prefix is a truncated document, and
    the rest is data after ``Connection: close`` (the HTTP layer may refuse that first)."""
    body = dump(ep.body)
    declared = str(max(len(body) - cut, 0)).encode()
    return request(
        ep,
        f"Content-Length {len(body)}-{cut}",
        Expect.REFUSE,
        content_length=declared,
        malformed_http=True,
    )


BAD_LENGTHS: tuple[bytes, ...] = (b"-1", b"abc", b"1e3", b"0x10", b"99999999999999999999999", b"+5")


def bad_content_length(ep: Endpoint, value: bytes) -> RawRequest:
    return request(
        ep, f"Content-Length {value!r}", Expect.REFUSE, content_length=value, malformed_http=True
    )


def huge_content_length(ep: Endpoint) -> RawRequest:
    """A Content-Length far over the limit on a small body: refused, or timed out."""
    return request(ep, "Content-Length 10**12", Expect.STALL, content_length=b"1000000000000")


def double_content_length(ep: Endpoint, same: bool) -> RawRequest:
    """Content-Length twice: with different values never valid; with the same value a
    server may read it as one (RFC 9110, 8.6)."""
    body = dump(ep.body)
    other = str(len(body) if same else len(body) + 3).encode()
    headers = [*_headers(ep), (b"Content-Length", other)]
    return request(
        ep,
        f"Content-Length twice ({'same' if same else 'different'})",
        Expect.ANY if same else Expect.REFUSE,
        headers=headers,
        malformed_http=True,
    )


def chunked(ep: Endpoint, variant: str) -> RawRequest:
    body = dump(ep.body)
    headers = [*_headers(ep), (b"Transfer-Encoding", b"chunked")]
    if variant == "valid":
        framed = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
        return request(
            ep, "chunked body", Expect.ANY, body=framed, headers=headers, content_length=b""
        )
    if variant == "with-length":
        # Both framings at once (request smuggling): refused, or the chunked one read.
        framed = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
        return request(
            ep,
            "chunked and Content-Length",
            Expect.ANY,
            body=framed,
            headers=headers,
            malformed_http=True,
        )
    if variant == "bad-size":
        framed = b"zz\r\n" + body + b"\r\n0\r\n\r\n"
        return request(
            ep,
            "chunk size 'zz'",
            Expect.REFUSE,
            body=framed,
            headers=headers,
            content_length=b"",
            malformed_http=True,
        )
    # unterminated: the last chunk never comes
    framed = f"{len(body):x}\r\n".encode() + body + b"\r\n"
    return request(
        ep, "chunked, no last chunk", Expect.STALL, body=framed, headers=headers, content_length=b""
    )


WRONG_METHODS: tuple[str, ...] = ("GET", "PUT", "DELETE", "PATCH")


def wrong_method(ep: Endpoint, method: str) -> RawRequest:
    return request(ep, f"{method} {ep.path}", Expect.REFUSE, method=method)


# --- headers ------------------------------------------------------------------------------

AGENT_HEADER = "X-Agent-Identity"
PRINCIPAL_HEADER = "X-Principal"
SESSION_HEADER = "X-Session-Id"
IDENTITY_HEADERS = (AGENT_HEADER, PRINCIPAL_HEADER, SESSION_HEADER)


@dataclass(frozen=True)
class IdentityValue:
    """A header value and whether a principal or session id / an agent identity is refused;
    ``control``: a control byte, which an HTTP parser may refuse before the application."""

    value: bytes
    subject_refused: bool
    agent_refused: bool
    note: str = ""
    control: bool = False


NOT_UTF8 = IdentityValue(b"\xff\xfe", True, True, "not UTF-8")
CONTROL_BYTE = IdentityValue(b"\x01a", True, True, "control 0x01", control=True)
IDENTITY_VALUES: tuple[IdentityValue, ...] = (
    NOT_UTF8,
    CONTROL_BYTE,
    IdentityValue(b"*", True, True, "wildcard"),
    IdentityValue(b"", True, True, "empty"),
    IdentityValue(b"   ", True, True, "blank"),
    IdentityValue(b"ab\xc3", True, True, "truncated UTF-8"),
    IdentityValue(b"\xed\xa0\x80", True, True, "UTF-8 surrogate"),
    IdentityValue(b"jos\xc3\xa9", False, True, "printable non-ASCII"),
    IdentityValue("用户".encode(), False, True, "printable CJK"),
    IdentityValue(b"a\xe2\x80\x8bb", True, True, "zero-width space"),
    IdentityValue(b"a\xc2\xa0b", True, True, "no-break space"),
    IdentityValue(b"a\xe2\x80\xaeb", True, True, "right-to-left override"),
    IdentityValue(b"\xef\xbb\xbfa", True, True, "byte-order mark"),
    IdentityValue(b"a\tb", True, True, "tab"),
    IdentityValue(b"x" * 257, True, True, "257 characters"),
    IdentityValue(b"kaos://agent/ns/" + b"n" * 300, True, True, "long agent identity"),
    IdentityValue(b"kaos://agent/Ns/x", False, True, "upper-case namespace"),
    IdentityValue(b"kaos://agent/ns/other", False, False, "another agent"),
    IdentityValue(b"p*", False, True, "star inside"),
    *(
        IdentityValue(bytes([c]) + b"a", True, True, f"control {c:#04x}", control=True)
        for c in [0, 8, 11, 27, 31, 127]
    ),
)


def identity_header(ep: Endpoint, name: str, iv: IdentityValue) -> RawRequest:
    headers = [*_headers(ep, drop=[name]), (name.encode(), iv.value)]
    refused = iv.agent_refused if name == AGENT_HEADER else iv.subject_refused
    expect = _refuse_or_any(refused and name in ep.identity_headers)
    label = f"{name}: {iv.note} {iv.value[:40]!r}"
    return request(ep, label, expect, headers=headers, malformed_http=iv.control)


def repeated_header(ep: Endpoint, name: str, spelled: str, second: bytes) -> RawRequest:
    """An identity header given twice (the second spelling may differ in case)."""
    first = dict(ep.headers).get(name) or "first"
    headers = [
        *_headers(ep, drop=[name]),
        (name.encode(), first.encode()),
        (spelled.encode(), second),
    ]
    expect = _refuse_or_any(name in ep.identity_headers)
    return request(ep, f"{name} twice ({first!r}, {second!r})", expect, headers=headers)


def junk_header(ep: Endpoint, name: bytes, value: bytes) -> RawRequest:
    """A header no service reads, with bytes that are not UTF-8 or not printable."""
    headers = [*_headers(ep), (name, value)]
    control = any((b < 0x20 and b != 0x09) or b == 0x7F for b in value)
    label = f"header {name!r}: {value[:40]!r}"
    return request(ep, label, Expect.ANY, headers=headers, malformed_http=control)


def header_case(ep: Endpoint, case: HeaderCase) -> RawRequest:
    headers = [*_headers(ep, drop=[case.name]), (case.name.encode(), case.value)]
    return request(ep, f"{case.name}: {case.value!r}", case.expect, headers=headers)


def _where(path: Path) -> str:
    return (
        "body"
        if not path
        else "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    )


# --- strategies ---------------------------------------------------------------------------


def _strategies(ep: Endpoint) -> list[st.SearchStrategy[RawRequest]]:
    values = value_paths(ep.body)
    strings = string_paths(ep.body) or values
    objects = object_paths(ep.body)
    depths = st.sampled_from([33, 64, 100, 1000, 1100, 5000, 100_000])
    wrong = [
        (p, v)
        for p in values
        for v in WRONG_VALUES
        if json_type(v) != json_type(get_at(ep.body, p))
    ]
    with_keys = [(p, k) for p in objects for k in [None, *get_at(ep.body, p)]]
    out: list[st.SearchStrategy[RawRequest]] = [
        st.just(valid(ep)),
        st.builds(
            deep_nesting,
            st.just(ep),
            st.sampled_from(values),
            depths,
            st.sampled_from(["array", "object"]),
        ),
        st.builds(
            huge_number,
            st.just(ep),
            st.sampled_from(values),
            st.integers(41, 5000),
            st.sampled_from(HUGE_NUMBERS),
        ),
        st.builds(
            non_finite,
            st.just(ep),
            st.sampled_from(values),
            st.sampled_from(["NaN", "Infinity", "-Infinity"]),
        ),
        st.sampled_from(with_keys).flatmap(
            lambda pk: st.builds(
                duplicate_key,
                st.just(ep),
                st.just(pk[0]),
                st.just(pk[1]),
                st.sampled_from(["x", 1, None]),
            )
        ),
        st.builds(
            control_text,
            st.just(ep),
            st.sampled_from(strings),
            st.sampled_from(CONTROL_CHARS),
            st.booleans(),
        ),
        st.builds(
            control_key, st.just(ep), st.sampled_from(objects), st.sampled_from(CONTROL_CHARS)
        ),
        st.sampled_from(SURROGATES).flatmap(
            lambda s: st.one_of(
                st.builds(
                    surrogate, st.just(ep), st.sampled_from(strings), st.just(s[0]), st.just(s[1])
                ),
                st.builds(
                    surrogate,
                    st.just(ep),
                    st.sampled_from(objects),
                    st.just(s[0]),
                    st.just(s[1]),
                    st.just(True),
                ),
            )
        ),
        st.builds(
            invalid_utf8, st.just(ep), st.sampled_from(strings), st.sampled_from(INVALID_UTF8)
        ),
        st.builds(
            other_encoding,
            st.just(ep),
            st.sampled_from(["utf-16", "utf-16-le", "utf-32", "utf-8-sig"]),
        ),
        st.builds(truncated, st.just(ep), st.integers(0, len(dump(ep.body)) - 1)),
        st.sampled_from(wrong).map(lambda pv: wrong_type(ep, *pv)),
        st.builds(not_an_object, st.just(ep), st.sampled_from(NOT_OBJECTS)),
        st.builds(
            unknown_field, st.just(ep), st.sampled_from(objects), st.sampled_from(UNKNOWN_FIELDS)
        ),
        st.builds(oversize, st.just(ep), st.sampled_from(strings), st.integers(0, 4096)),
        st.builds(
            content_encoding,
            st.just(ep),
            st.sampled_from(ENCODINGS),
            st.sampled_from(["plain", "junk", "gzip"]),
        ),
        st.sampled_from([content_encoding_twice(ep), content_encoding_identity(ep)]),
        st.sampled_from(CONTENT_TYPES).map(lambda ct: content_type(ep, *ct)),
        st.builds(short_body, st.just(ep), st.integers(1, 100)),
        st.builds(long_body, st.just(ep), st.integers(1, 50)),
        st.builds(bad_content_length, st.just(ep), st.sampled_from(BAD_LENGTHS)),
        st.sampled_from(
            [
                huge_content_length(ep),
                double_content_length(ep, True),
                double_content_length(ep, False),
            ]
        ),
        st.builds(
            chunked,
            st.just(ep),
            st.sampled_from(["valid", "with-length", "bad-size", "unterminated"]),
        ),
        st.builds(wrong_method, st.just(ep), st.sampled_from(WRONG_METHODS)),
        st.builds(
            identity_header,
            st.just(ep),
            st.sampled_from(IDENTITY_HEADERS),
            st.sampled_from(IDENTITY_VALUES),
        ),
        st.tuples(
            st.sampled_from(IDENTITY_HEADERS).flatmap(
                lambda n: st.tuples(st.just(n), st.sampled_from([n, n.lower(), n.upper()]))
            ),
            st.sampled_from([b"other", b"kaos://agent/ns/other", b"\xff"]),
        ).map(lambda t: repeated_header(ep, t[0][0], t[0][1], t[1])),
        st.builds(
            junk_header,
            st.just(ep),
            st.sampled_from([b"X-Request-Id", b"X-Kaos-Junk", b"Accept-Language", b"User-Agent"]),
            st.sampled_from(
                [b"\xff\xfe\xfd", "é".encode(), b"a\x01", b"x" * 4000, b"\xed\xa0\x80"]
            ),
        ),
    ]
    if ep.header_cases:
        out.append(st.sampled_from(ep.header_cases).map(lambda c: header_case(ep, c)))
    return out


def hostile_requests(endpoints: Sequence[Endpoint]) -> st.SearchStrategy[RawRequest]:
    """One mutation of one endpoint's valid request, every kind equally likely."""
    per_endpoint = [st.one_of(*_strategies(ep)) for ep in endpoints]
    return st.sampled_from(per_endpoint).flatmap(lambda strategy: strategy)


def issue_cases(endpoints: Sequence[Endpoint]) -> list[RawRequest]:
    """The inputs issue 22 found, as explicit examples run before the generated ones (one
    stalled body for all: each costs the body timeout)."""
    cases: list[RawRequest] = []
    for ep in endpoints:
        strings = string_paths(ep.body)
        text = strings[-1] if strings else ()
        cases += [
            valid(ep),
            deep_nesting(ep, (), 1000),
            *(deep_nesting(ep, p, 1000, "object") for p in ep.deep_paths),
            *(deep_nesting(ep, p, 100, "object") for p in ep.deep_paths),
            huge_number(ep, text, 4301),
            content_encoding(ep, "gzip", "plain"),
            identity_header(ep, PRINCIPAL_HEADER, NOT_UTF8),
            identity_header(ep, PRINCIPAL_HEADER, CONTROL_BYTE),
            repeated_header(ep, PRINCIPAL_HEADER, PRINCIPAL_HEADER, b"other"),
            control_text(ep, text, "\x00"),
            oversize(ep, text, 0),
            wrong_type(ep, text, 5),
            truncated(ep, len(dump(ep.body)) // 2),
        ]
    if endpoints:
        cases.append(short_body(endpoints[0], 10))
    return cases


# --- the raw client -----------------------------------------------------------------------


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


# --- the shared properties ----------------------------------------------------------------


def is_rpc_error(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("error"), dict)
        and isinstance(doc["error"].get("code"), int)
        and isinstance(doc["error"].get("message"), str)
    )


def is_kaos_error(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("error"), dict)
        and isinstance(doc["error"].get("code"), str)
        and isinstance(doc["error"].get("message"), str)
        and isinstance(doc.get("request_id"), str)
    )


def refused(ex: Exchange) -> bool:
    """The service turned the request down: a 4xx, a JSON-RPC error object, or an MCP tool
    result marked ``isError`` (its arguments did not validate: the tool did not run)."""
    if 400 <= ex.status < 500:
        return True
    if ex.status == 0:
        return True  # dropped: nothing was done with it (checked by ``check_exchange``)
    if not ex.request.endpoint.jsonrpc:
        return False
    try:
        docs = ex.documents()
    except ValueError:
        return False
    for doc in docs:
        if is_rpc_error(doc):
            return True
        result = doc.get("result") if isinstance(doc, dict) else None
        if isinstance(result, dict) and result.get("isError") is True:
            return True
    return False


def _is_json(ex: Exchange) -> bool:
    try:
        ex.documents()
    except ValueError:
        return False
    return True


def check_exchange(ex: Exchange) -> None:
    """The properties every service holds for every request (see the module docstring)."""
    req = ex.request
    assert not ex.hung, f"no answer within {req.deadline:g}s:\n{ex.describe()}"
    leak = LEAK_RE.search(ex.body.decode("utf-8", "replace"))
    assert leak is None, f"the answer names {leak.group()!r}:\n{ex.describe()}"
    if req.expect is Expect.STALL:
        # aiohttp closes a stalled sender's connection; a 408 may or may not get out first.
        assert ex.status in (0, 400, 408, 413), f"a stalled body is not timed out:\n{ex.describe()}"
        assert ex.elapsed <= req.deadline
        return
    assert ex.status != 0, f"the connection closed without an answer:\n{ex.describe()}"
    assert ex.status < 500, f"a server error:\n{ex.describe()}"
    if req.malformed_http and 400 <= ex.status < 500 and not _is_json(ex):
        return  # refused by the HTTP parser before any application code, in its own text
    try:
        docs = ex.documents()
    except ValueError:
        raise AssertionError(f"the answer is not JSON:\n{ex.describe()}") from None
    if ex.status >= 400:
        assert len(docs) == 1 and (is_kaos_error(docs[0]) or is_rpc_error(docs[0])), (
            f"an error answer without the error shape:\n{ex.describe()}"
        )
    if req.expect is Expect.REFUSE:
        assert refused(ex), f"a hostile request was not refused:\n{ex.describe()}"
    elif req.expect is Expect.ACCEPT:
        assert 200 <= ex.status < 300 and not refused(ex), (
            f"a valid request was not served:\n{ex.describe()}"
        )


async def run_one(
    port: int,
    req: RawRequest,
    *,
    session: str,
    snapshot: Callable[[], Any] | None = None,
) -> Exchange:
    """Send one request, check the shared properties, and for a refused request that
    ``snapshot()`` (what the service stores or calls) did not change."""
    before = None if snapshot is None else await asyncio.to_thread(snapshot)
    ex = await send(port, req, session=session)
    check_exchange(ex)
    if snapshot is not None and refused(ex):
        after = await asyncio.to_thread(snapshot)
        assert after == before, (
            f"a refused request changed state {before} -> {after}:\n{ex.describe()}"
        )
    return ex
