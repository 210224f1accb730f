"""Mutations of how a body is declared and delimited: Content-Encoding, Content-Type,
Content-Length, chunked transfer, and the method."""

from __future__ import annotations

import gzip

from tests.support.hostile.documents import dump
from tests.support.hostile.request import (
    Endpoint,
    Expect,
    RawRequest,
    _headers,
    _refuse_or_any,
    request,
)

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
