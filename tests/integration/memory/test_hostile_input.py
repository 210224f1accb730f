"""On the memory service, hostile input is a clear 4xx and writes nothing.

Each example of the issue is one test, run against the real service over loopback on both
backends (``memory_service`` is parametrised ``local``/``external``). Requests go out as
raw bytes over a socket, because the point is what arrives on the wire: HTTP clients
refuse to send a header byte that is not UTF-8, or repeat a header, or lie about
compression. After each refusal the test reads the service's own tables: no turn, no
session, no attribution row may have appeared.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fixtures.memory import MemoryServer
from tests.support.memory_http import uid
from tests.support.rawhttp import Header, post_json


def json_headers(**extra: bytes) -> list[Header]:
    return [("Content-Type", b"application/json"), *extra.items()]


def error(doc: dict[str, Any], code: str) -> str:
    """The error message, after checking the error shape and its code."""
    assert isinstance(doc.get("error"), dict), doc
    assert doc["error"]["code"] == code, doc
    assert isinstance(doc.get("request_id"), str) and doc["request_id"], doc
    message = doc["error"]["message"]
    assert isinstance(message, str) and message, doc
    return message


def write_body(content: Any = "hello", **extra: Any) -> bytes:
    return json.dumps({"turns": [{"role": "user", "content": content}], **extra}).encode()


def rows(server: MemoryServer) -> tuple[int, int, int]:
    """Turns, sessions and attribution rows the service has stored, read from its tables."""
    return len(server.db.turns()), len(server.db.sessions()), len(server.db.attribution())


def nested(depth: int) -> Any:
    doc: Any = "deep"
    for _ in range(depth):
        doc = {"x": doc}
    return doc


async def test_a_body_nested_1000_deep_is_400(memory_service: MemoryServer) -> None:
    before = rows(memory_service)
    body = b'{"turns": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    status, doc = await post_json(
        memory_service.url, "/v1/write", body, json_headers(**{"X-Session-Id": uid("s").encode()})
    )
    assert status == 400
    assert "nested deeper than 32 levels" in error(doc, "json_too_deep")
    assert rows(memory_service) == before


async def test_nesting_inside_a_turns_content_is_400(memory_service: MemoryServer) -> None:
    before = rows(memory_service)
    status, doc = await post_json(
        memory_service.url,
        "/v1/write",
        write_body(nested(100)),
        json_headers(**{"X-Session-Id": uid("s").encode()}),
    )
    assert status == 400
    message = error(doc, "json_too_deep")
    assert message.startswith("turns[0].content") and "nested deeper" in message
    assert rows(memory_service) == before


async def test_a_4301_digit_top_k_is_400(memory_service: MemoryServer) -> None:
    body = b'{"level": "session", "query": "q", "top_k": ' + b"9" * 4301 + b"}"
    status, doc = await post_json(
        memory_service.url, "/v1/recall", body, json_headers(**{"X-Session-Id": b"s-1"})
    )
    assert status == 400
    assert "4301 characters" in error(doc, "number_too_large")


async def test_gzip_content_encoding_with_a_body_that_is_not_gzip_is_415(
    memory_service: MemoryServer,
) -> None:
    before = rows(memory_service)
    status, doc = await post_json(
        memory_service.url,
        "/v1/write",
        write_body(),
        json_headers(**{"Content-Encoding": b"gzip", "X-Session-Id": uid("s").encode()}),
    )
    assert status == 415
    assert "Content-Encoding 'gzip' is not accepted" in error(doc, "unsupported_encoding")
    assert rows(memory_service) == before


@pytest.mark.parametrize("failure_mode", ["soft", "strict"])
async def test_a_non_utf8_byte_in_x_principal_is_400_and_writes_nothing(
    memory_service: MemoryServer, failure_mode: str
) -> None:
    # Not "200 accepted: 0, degraded: true" (the store failing to encode the principal),
    # not a 500 (strict): the header itself is refused before any tier is touched.
    before = rows(memory_service)
    status, doc = await post_json(
        memory_service.url,
        "/v1/write",
        write_body(failure_mode=failure_mode),
        json_headers(**{"X-Principal": b"al\xffce", "X-Session-Id": uid("s").encode()}),
    )
    assert status == 400, doc
    assert "X-Principal must be valid UTF-8 text" in error(doc, "bad_identity_header")
    assert rows(memory_service) == before


async def test_a_non_utf8_x_session_id_is_400(memory_service: MemoryServer) -> None:
    before = rows(memory_service)
    status, doc = await post_json(
        memory_service.url,
        "/v1/write",
        write_body(),
        json_headers(**{"X-Session-Id": b"s-\xc3\x28"}),
    )
    assert status == 400
    assert "X-Session-Id must be valid UTF-8 text" in error(doc, "bad_identity_header")
    assert rows(memory_service) == before


async def test_a_utf8_principal_is_a_name_like_any_other(memory_service: MemoryServer) -> None:
    # Valid non-ASCII UTF-8 is accepted deliberately: principals are user names.
    session = uid("s")
    status, doc = await post_json(
        memory_service.url,
        "/v1/write",
        write_body("hola"),
        json_headers(**{"X-Principal": "josé".encode(), "X-Session-Id": session.encode()}),
    )
    assert status == 200, doc
    assert doc["accepted"] == 1 and doc["degraded"] is False
    stored = [t for t in memory_service.db.turns() if t["content"] == "hola"]
    assert [t["principal"] for t in stored] == ["josé"]


@pytest.mark.parametrize("where", ["text", "key"])
async def test_a_nul_character_in_a_turn_is_400_and_writes_nothing(
    memory_service: MemoryServer, where: str
) -> None:
    before = rows(memory_service)
    turn: dict[str, str] = {"role": "user", "content": "a\u0000b"}
    if where == "key":
        turn = {"role": "user", "content": "ab", "n\u0000": "x"}
    status, doc = await post_json(
        memory_service.url,
        "/v1/write",
        json.dumps({"turns": [turn]}).encode(),
        json_headers(**{"X-Session-Id": uid("s").encode()}),
    )
    assert status == 400
    message = error(doc, "invalid_text")
    assert message.startswith("turns[0]") and "U+0000" in message
    assert rows(memory_service) == before


@pytest.mark.parametrize("header", ["X-Principal", "X-Session-Id", "X-Agent-Identity"])
async def test_a_repeated_identity_header_is_400(memory_service: MemoryServer, header: str) -> None:
    before = rows(memory_service)
    values = {
        "X-Principal": (b"alice", b"mallory"),
        "X-Session-Id": (b"s-a", b"s-b"),
        "X-Agent-Identity": (b"kaos://agent/team/alpha", b"kaos://agent/team/beta"),
    }[header]
    headers = [("Content-Type", b"application/json"), (header, values[0]), (header, values[1])]
    if header != "X-Session-Id":
        headers.append(("X-Session-Id", uid("s").encode()))
    status, doc = await post_json(memory_service.url, "/v1/write", write_body(), headers)
    assert status == 400
    assert error(doc, "bad_identity_header") == f"{header} given more than once"
    assert rows(memory_service) == before
