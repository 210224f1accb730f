"""A Mem0 dump whose mapped attribution no header could name (a control character, a
whitespace-only principal, a non-printable agent) is refused by its position before
anything is written, on both backends: such a fact could never be recalled or forgotten
by its owner, and PostgreSQL cannot store a NUL at all (schemathesis found the 500 it
gave for a NUL in a mapping template)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from tests.fixtures.memory import MakeMemory
from tests.integration.memory.portable.portable_http import counts, import_

GOOD = {"id": "m-1", "memory": "I keep bees", "user_id": "alice", "created_at": "2026-01-01"}


@pytest.mark.parametrize(
    ("second", "mapping", "code", "problem"),
    [
        ({"user_id": "al\tice"}, {}, "invalid_line", "result 2: principal: contains control"),
        ({"user_id": "   "}, {}, "invalid_line", "result 2: principal: is empty"),
        ({"run_id": "s\n1"}, {}, "invalid_line", "result 2: session: contains control"),
        ({"agent_id": "pl\u200banner"}, {}, "invalid_line", "result 2: agent: contains a char"),
        # Through the query string, where the body's own text check does not reach.
        ({}, {"session": "run\x00{id}"}, "invalid_line", "result 1: session: contains control"),
        ({}, {"agent": "\x00{user_id}"}, "invalid_line", "result 1: agent: contains a char"),
        # In the body, a NUL is refused with any JSON body's text check.
        ({"user_id": "al\x00ice"}, {}, "invalid_text", "results[1].user_id: text contains"),
    ],
)
@pytest.mark.parametrize("backend", ["local", "external"])
async def test_an_unnameable_attribution_is_refused_and_nothing_written(
    memory_factory: MakeMemory,
    backend: str,
    second: dict[str, str],
    mapping: dict[str, str],
    code: str,
    problem: str,
) -> None:
    server = memory_factory(backend)
    rows = counts(server)
    dump = {"results": [GOOD, {**GOOD, "id": "m-2", **second}]}
    query = "?" + urlencode({"source": "mem0", **mapping})

    status, doc = await import_(
        server, json.dumps(dump).encode(), query=query, content_type="application/json"
    )

    assert status == 400, doc
    assert doc["error"]["code"] == code
    assert doc["error"]["message"].startswith(problem), doc
    assert counts(server) == rows
