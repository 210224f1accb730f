"""Export and import between the two backends (embedded Chroma and SQLite, PostgreSQL with
pgvector): a local store's export imported into a fresh external store recalls the same for
every principal, importing it again changes nothing, one principal's export holds nobody
else's memory, a malformed line is refused by number with nothing written, an agent may do
neither, and a store in the single-table pgvector layout migrates to a partitioned one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kaos_memory.crypto.kek import new_kek_version

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.integration.memory.portable.portable_http import (
    counts,
    export,
    import_,
    lines,
    recall,
)
from tests.support.memory_http import AGENT_A, AGENT_B, call, eventually, headers, seed_facts
from tests.support.postgres import pg_query

pytestmark = pytest.mark.postgres

SETTINGS: dict[str, Any] = {"token_budget": 200, "max_read_scope": "user"}
PEOPLE = {
    "alice": {
        "s-alice-1": ["alice-apples", "alice-rivers", "alice-violin"],
        "s-alice-2": ["alice-garden"],
    },
    "bob": {"s-bob-1": ["bob-copper", "bob-lantern", "bob-stone"]},
}
QUERIES = ("apples", "violin", "copper", "garden", "stone")


async def settled(server: MemoryServer) -> None:
    async def probe() -> tuple[int, int]:
        return server.db.outbox_depth(), len(server.db.folds())

    await eventually(probe, lambda v: v[0] == 0 and v[1] >= 2, what="folds digested and extracted")


async def seeded(server: MemoryServer) -> None:
    for principal, sessions in PEOPLE.items():
        for session, markers in sessions.items():
            agent = AGENT_A if session.endswith("1") else AGENT_B
            ident = headers(agent=agent, principal=principal, session=session)
            await seed_facts(server.url, ident, markers)
            status, doc, _ = await call(
                server.url,
                "/v1/write",
                {"turns": [{"role": "user", "content": f"{principal} short note"}]},
                hdrs=ident,
            )
            assert status in (200, 202), doc
    await settled(server)


async def everyone(server: MemoryServer) -> dict[tuple[str, str, str], Any]:
    return {
        (principal, session, query): await recall(server, principal, session, query)
        for principal, sessions in PEOPLE.items()
        for session in sessions
        for query in QUERIES
    }


def make_kek(root: Path) -> Path:
    """A KEK directory as a mounted Secret holds it (``crypto.kek``)."""
    root.mkdir(parents=True)
    (root / "v1").write_text(new_kek_version())
    (root / "current").write_text("v1")
    return root


@pytest.mark.parametrize("sealed", [False, True], ids=["clear", "sealed"])
async def test_a_local_store_moves_to_an_external_one_and_recalls_the_same(
    memory_factory: MakeMemory, tmp_path: Path, sealed: bool
) -> None:
    # Sealed: each store has its own KEK; the export is in the clear, the target seals.
    keys = [
        {"encryption_kek_dir": make_kek(tmp_path / f"kek-{n}")} if sealed else {} for n in (1, 2)
    ]
    local = memory_factory("local", **SETTINGS, **keys[0])
    await seeded(local)
    status, body = await export(local, {"level": "store"})
    assert status == 200, body
    records = lines(body)
    header = records[0]
    assert header["kind"] == "header" and header["format"] == "kaos-memory-export"
    assert header["version"] == 1 and header["store"] == "kaos_memory_test"
    assert header["embedding"] == {"model": "dev-embedder", "dims": 64}
    kinds = {r["kind"] for r in records[1:]}
    assert kinds == {"turn", "digest", "fact"}, kinds
    fact = next(r for r in records if r["kind"] == "fact")
    assert fact["principal"] in PEOPLE and fact["metadata"]["kaos_fold"]

    assert b"alice-apples" in body
    external = memory_factory("external", collection="kaos_moved", **SETTINGS, **keys[1])
    status, doc = await import_(external, body)
    assert status == 200, doc
    moved = sum(r["kind"] != "header" for r in records)
    assert doc["turns"] + doc["digests"] + doc["facts"] == moved and doc["skipped"] == 0, doc
    assert doc["reembedded"] is False
    assert external.db.outbox_depth() == 0

    before = await everyone(local)
    assert all(v["facts"] for v in before.values())
    # Every tier takes part: digests of the folded sessions, every session's window.
    assert sum(v["digest"][0] is not None for v in before.values()) >= 2 * len(QUERIES)
    assert all(v["window"] for v in before.values())
    assert await everyone(external) == before
    if sealed:
        # As stored (the fixture's readers would open the texts): nothing in the clear.
        assert external.db.dsn is not None
        raw = [
            *external.db.relational("SELECT content FROM kaos_mem_turns"),
            *external.db.relational("SELECT summary FROM kaos_mem_digests"),
            *pg_query(external.db.dsn, "SELECT payload::text FROM kaos_moved"),
        ]
        assert len(raw) == moved
        stored = json.dumps(raw)
        for word in ("apples", "violin", "copper", "short note"):
            assert word not in stored

    # The same file again: every record is there already.
    rows = counts(external)
    status, doc = await import_(external, body)
    assert status == 200, doc
    assert (doc["turns"], doc["digests"], doc["facts"], doc["skipped"]) == (0, 0, 0, moved), doc
    assert counts(external) == rows
    assert await everyone(external) == before

    # And its own export is the same memory (the store's name aside).
    status, again = await export(external, {"level": "store"})
    assert status == 200

    def content(recs: list[dict[str, Any]]) -> list[Any]:
        return sorted(
            json.dumps({k: v for k, v in r.items() if k != "id"}, sort_keys=True) for r in recs[1:]
        )

    assert content(lines(again)) == content(records)


async def test_a_principals_export_holds_nobody_elses_memory(memory_factory: MakeMemory) -> None:
    local = memory_factory("local", **SETTINGS)
    await seeded(local)
    status, body = await export(local, {"level": "user", "principal": "bob"})
    assert status == 200
    assert b"alice" not in body
    records = lines(body)
    assert {r["kind"] for r in records[1:]} == {"turn", "digest", "fact"}
    assert {r.get("principal") for r in records[1:] if r["kind"] != "digest"} == {"bob"}
    assert {r["session"] for r in records[1:]} == {"s-bob-1"}
    # Imported into the store it came from, it finds every record there already.
    rows = counts(local)
    status, doc = await import_(local, body)
    assert status == 200 and doc["skipped"] == len(records) - 1, doc
    assert counts(local) == rows

    status, body = await export(local, {"level": "agent", "agent": AGENT_B})
    assert status == 200
    records = lines(body)
    assert {r["session"] for r in records[1:]} == {"s-alice-2"}
    assert {r["agent"] for r in records[1:] if r["kind"] != "digest"} == {AGENT_B}


async def test_a_malformed_line_is_refused_by_number_and_nothing_is_written(
    memory_factory: MakeMemory,
) -> None:
    local = memory_factory("local", **SETTINGS)
    await seeded(local)
    status, body = await export(local, {"level": "store"})
    good = body.splitlines()
    external = memory_factory("external", collection="kaos_refused", **SETTINGS)
    empty = counts(external)
    last = len(good)
    bad_lines = {
        last: b'{"kind": "fact", "id": "x", "session": "s"}',
        2: b"{not json",
        3: json.dumps({**json.loads(good[2]), "role": ""}).encode(),
    }
    for number, bad in bad_lines.items():
        broken = b"\n".join([*good[: number - 1], bad, *good[number:]]) + b"\n"
        status, doc = await import_(external, broken)
        assert status == 400, doc
        assert doc["error"]["code"] == "invalid_line"
        assert doc["error"]["message"].startswith(f"line {number}: "), doc
        assert counts(external) == empty
    status, doc = await import_(external, b"\n".join(good[1:]))
    assert status == 400 and doc["error"]["message"].startswith("line 1: "), doc
    assert counts(external) == empty


async def test_an_agent_may_neither_export_nor_import(memory_factory: MakeMemory) -> None:
    server = memory_factory("local", **SETTINGS)
    await seeded(server)
    rows = counts(server)
    agent = headers(agent=AGENT_A, principal="alice")
    status, body = await export(server, {"level": "user", "principal": "alice"}, hdrs=agent)
    assert status == 403 and json.loads(body)["error"]["code"] == "portable_forbidden"
    status, doc, _ = await call(
        server.url, "/v1/import", raw=b"{}", content_type="application/x-ndjson", hdrs=agent
    )
    assert status == 403 and doc["error"]["code"] == "portable_forbidden", doc
    assert counts(server) == rows


async def test_a_single_table_store_migrates_to_a_partitioned_one(
    memory_factory: MakeMemory, pg_make_database: Any
) -> None:
    old = memory_factory("external", collection="kaos_single", pg_partitions=0, **SETTINGS)
    assert old.db.dsn is not None
    assert pg_query(old.db.dsn, "SELECT relkind FROM pg_class WHERE relname = 'kaos_single'") == [
        ("r",)
    ]
    await seeded(old)
    status, body = await export(old, {"level": "store"})
    assert status == 200
    new = memory_factory("external", collection="kaos_parted", dsn=pg_make_database(), **SETTINGS)
    assert new.db.dsn is not None
    assert pg_query(new.db.dsn, "SELECT relkind FROM pg_class WHERE relname = 'kaos_parted'") == [
        ("p",)
    ]
    status, doc = await import_(new, body)
    assert status == 200, doc
    assert await everyone(new) == await everyone(old)
