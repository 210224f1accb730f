"""The import's check phase: every line parsed and checked before anything is written,
whatever the chunks the body arrives in; a refusal names its line."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator

import pytest
from kaos_memory.portable.importer import InvalidLine, check_lines, spooled_records

HEADER = {
    "kind": "header",
    "format": "kaos-memory-export",
    "version": 1,
    "store": "s",
    "scope": {"level": "store"},
    "embedding": {"model": "m", "dims": 8},
    "exported_at": "2026-12-05T00:00:00+00:00",
}


def turn(session: str, principal: str | None, text: str = "hello") -> dict[str, object]:
    return {
        "kind": "turn",
        "session": session,
        "role": "user",
        "text": text,
        "at": "2026-12-05T00:00:01+00:00",
        "principal": principal,
    }


def body(*docs: dict[str, object]) -> bytes:
    return b"".join(json.dumps(d).encode() + b"\n" for d in docs)


async def chunked(data: bytes, size: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


@pytest.mark.parametrize("size", [1, 7, 1 << 20])
async def test_lines_are_checked_across_any_chunking(size: int) -> None:
    data = body(
        HEADER,
        turn("a", "alice", "é" * 50),
        {
            "kind": "digest",
            "session": "a",
            "version": 1,
            "text": "d",
            "at": "t",
            "principal": "alice",
        },
    )
    spool = io.BytesIO()
    plan = await check_lines(chunked(data, size), spool, facts_allowed=True)
    assert plan.records == 2 and plan.sessions == {("a", "alice")}
    assert spool.getvalue() == data
    assert [r.kind for r in spooled_records(spool)] == ["turn", "digest"]


async def test_one_session_id_of_two_principals_is_two_conversations() -> None:
    digest = {"kind": "digest", "session": "a", "version": 1, "text": "d", "at": "t"}
    data = body(HEADER, turn("a", "alice"), turn("a", "bob"), turn("a", None), digest)
    plan = await check_lines(chunked(data, 5), io.BytesIO(), facts_allowed=False)
    assert plan.sessions == {("a", "alice"), ("a", "bob"), ("a", None)}


@pytest.mark.parametrize(
    ("data", "number", "problem"),
    [
        (body(turn("a", "alice")), 1, "the first line must be the header"),
        (body(HEADER, HEADER), 2, "the header must be the first line"),
        (body(HEADER) + b"\n\n{]\n", 4, "malformed JSON"),
        (
            body(
                HEADER, {"kind": "fact", "id": "f", "text": "t", "session": "s", "created_at": "t"}
            ),
            2,
            "no long-term tier",
        ),
        (b"", 1, "no header line"),
        (body(HEADER, turn("a", "x", "\u0000")), 2, "control character"),
    ],
)
async def test_a_bad_line_is_named(data: bytes, number: int, problem: str) -> None:
    with pytest.raises(InvalidLine) as refused:
        await check_lines(chunked(data, 5), io.BytesIO(), facts_allowed=False)
    assert refused.value.line == number
    assert refused.value.message.startswith(f"line {number}: ")
    assert problem in refused.value.message
    assert refused.value.message.endswith("nothing was imported")
