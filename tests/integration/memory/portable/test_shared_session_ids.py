"""A session id is each principal's own, in an export and an import too: a store where
alice and bob both used "alice-1" (each with a window and a digest of their own) exports
two sessions under that id, and a fresh store importing the file recalls for each what
the source did; importing it again changes nothing. Both backends."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.fixtures.postgres import MakeDatabase
from tests.integration.memory.portable.portable_http import counts, export, import_, lines
from tests.support.memory_http import AGENT_A, call, eventually, headers, long_text, seed_facts

pytestmark = pytest.mark.postgres

SETTINGS: dict[str, Any] = {"token_budget": 200, "max_read_scope": "user"}
SESSION = "alice-1"
MARKERS = {"alice": ["alice-apples", "alice-violin"], "bob": ["bob-copper", "bob-stone"]}


async def seeded(server: MemoryServer) -> None:
    for principal, markers in MARKERS.items():
        ident = headers(agent=AGENT_A, principal=principal, session=SESSION)
        await seed_facts(server.url, ident, markers)
        note = {"turns": [{"role": "user", "content": f"{principal} short note"}]}
        status, doc, _ = await call(server.url, "/v1/write", note, hdrs=ident)
        assert status in (200, 202), doc

    async def probe() -> tuple[int, int]:
        return server.db.outbox_depth(), len(server.db.folds())

    await eventually(probe, lambda v: v[0] == 0 and v[1] >= 2, what="both sessions folded")


async def session_recall(server: MemoryServer, principal: str) -> dict[str, Any]:
    """The principal's window and digest of "alice-1" (the conversational tiers)."""
    status, doc, _ = await call(
        server.url,
        "/v1/recall",
        {
            "level": "session",
            "query": long_text("apples"),
            "include": ["short_term", "medium_term"],
        },
        hdrs=headers(agent=AGENT_A, principal=principal, session=SESSION),
    )
    assert status == 200 and doc["degraded"] is False, doc
    return {
        "digest": (doc["medium_term"]["version"], doc["medium_term"]["summary"]),
        "window": [(t["role"], t["content"], t["at"]) for t in doc["short_term"]["window"]],
    }


async def both(server: MemoryServer) -> dict[str, dict[str, Any]]:
    return {p: await session_recall(server, p) for p in MARKERS}


@pytest.mark.parametrize("backend", ["local", "external"])
async def test_one_session_id_of_two_principals_exports_and_imports_as_two_sessions(
    memory_factory: MakeMemory, pg_make_database: MakeDatabase, backend: str
) -> None:
    source = memory_factory(backend, **SETTINGS)
    await seeded(source)
    before = await both(source)
    for principal, seen in before.items():
        assert seen["digest"][1] is not None, f"{principal}'s digest"
        assert seen["window"] == [("user", f"{principal} short note", seen["window"][0][2])]
    assert "alice" not in before["bob"]["digest"][1]

    status, body = await export(source, {"level": "store"})
    assert status == 200, body
    records = lines(body)
    digests = {(r["session"], r["principal"]) for r in records if r["kind"] == "digest"}
    assert digests == {(SESSION, "alice"), (SESSION, "bob")}

    fresh = {"dsn": pg_make_database()} if backend == "external" else {}
    target = memory_factory(backend, collection="kaos_shared_ids", **fresh, **SETTINGS)
    status, doc = await import_(target, body)
    assert status == 200, doc
    moved = sum(r["kind"] != "header" for r in records)
    assert doc["turns"] + doc["digests"] + doc["facts"] == moved and doc["skipped"] == 0, doc
    assert await both(target) == before

    rows = counts(target)
    status, doc = await import_(target, body)
    assert status == 200, doc
    assert (doc["turns"], doc["digests"], doc["facts"], doc["skipped"]) == (0, 0, 0, moved), doc
    assert counts(target) == rows
    assert await both(target) == before
