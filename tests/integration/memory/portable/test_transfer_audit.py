"""Exports and imports in the store's audit (``GET /v1/audit``), on both backends: each is
recorded with its actor, scope, outcome and records moved beside the forgets, and listed by
``action``; an import refused for a bad line leaves a ``failed`` record and nothing else; a
transfer the audit cannot record is refused before a record moves; an export whose client
went away mid-stream is recorded ``incomplete``."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any
from urllib.parse import urlsplit

import pytest
from kaos_core.memory.portable import (
    DigestRecord,
    Embedding,
    ExportScope,
    FactRecord,
    Header,
    TurnRecord,
)
from pydantic import BaseModel

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.integration.memory.portable.portable_http import counts, export, import_, lines
from tests.support.memory_http import AGENT_A, call, eventually, headers
from tests.support.postgres import pg_query

BACKENDS = ["local", pytest.param("external", marks=pytest.mark.postgres)]
SETTINGS: dict[str, Any] = {"token_budget": 200, "max_read_scope": "user"}
AT = "2026-01-02T03:04:05+00:00"
UNVERIFIED_ADMIN = {"kind": "admin", "name": None, "verified": False}
NO_COUNTS = {"turns": 0, "digests": 0, "facts": 0, "skipped": 0}


def portable_file(*records: BaseModel) -> bytes:
    header = Header(
        store="elsewhere",
        scope=ExportScope(level="store"),
        embedding=Embedding(model="dev-embedder", dims=64),
        exported_at=AT,
    )
    return b"".join(r.model_dump_json().encode() + b"\n" for r in (header, *records))


def turn(session: str, principal: str, text: str) -> TurnRecord:
    return TurnRecord(
        session=session, role="user", text=text, at=AT, principal=principal, agent=AGENT_A
    )


def fact(n: int, session: str, principal: str, text: str) -> FactRecord:
    return FactRecord(
        id=f"f{n}", text=text, session=session, principal=principal, agent=AGENT_A, created_at=AT
    )


# Bob's session (two turns, a digest version, two facts) and one turn and fact of alice's.
MEMORY = portable_file(
    turn("s-bob", "bob", "bob-marker-otter likes rivers"),
    turn("s-bob", "bob", "bob-marker-kettle boils tea"),
    DigestRecord(session="s-bob", version=1, text="bob-marker-digest", at=AT, principal="bob"),
    fact(1, "s-bob", "bob", "bob-marker-fact likes otters"),
    fact(2, "s-bob", "bob", "bob-marker-fact2 drinks tea"),
    turn("s-alice", "alice", "alice-marker-violin"),
    fact(3, "s-alice", "alice", "alice-marker-fact plays the violin"),
)


async def audit(server: MemoryServer, query: str = "") -> list[dict[str, Any]]:
    status, page, _ = await call(server.url, f"/v1/audit?limit=50{query}", method="GET")
    assert status == 200, page
    records: list[dict[str, Any]] = page["records"]
    return records


def moved(doc: dict[str, Any]) -> dict[str, int]:
    return {k: doc[k] for k in ("turns", "digests", "facts", "skipped")}


def kinds(body: bytes) -> dict[str, int]:
    records = lines(body)[1:]
    return {
        "turns": sum(r["kind"] == "turn" for r in records),
        "digests": sum(r["kind"] == "digest" for r in records),
        "facts": sum(r["kind"] == "fact" for r in records),
        "skipped": 0,
    }


@pytest.mark.parametrize("backend", BACKENDS)
async def test_exports_and_imports_are_listed_beside_the_forgets(
    memory_factory: MakeMemory, backend: str
) -> None:
    server = memory_factory(backend, **SETTINGS)
    status, first = await import_(server, MEMORY)
    assert status == 200, first
    assert moved(first) == {"turns": 3, "digests": 1, "facts": 3, "skipped": 0}
    status, again = await import_(server, MEMORY)
    assert status == 200 and moved(again) == {**NO_COUNTS, "skipped": 7}, again
    dump = {"results": [{"id": "m1", "memory": "carol-marker-maps", "user_id": "carol",
                         "created_at": AT}]}  # fmt: skip
    status, from_mem0 = await import_(
        server, json.dumps(dump).encode(), query="?source=mem0", content_type="application/json"
    )
    assert status == 200 and from_mem0["facts"] == 1, from_mem0
    status, body = await export(server, {"level": "user", "principal": "bob"})
    assert status == 200
    assert kinds(body) == {"turns": 2, "digests": 1, "facts": 2, "skipped": 0}
    status, forgot, _ = await call(
        server.url, "/v1/forget", {"level": "user"}, hdrs=headers(principal="alice")
    )
    assert status == 200, forgot

    records = await audit(server)
    assert [r["action"] for r in records] == ["forget", "export", "import", "import", "import"]
    forget, exported, mem0, repeated, imported = records
    assert [r["id"] for r in records] == sorted((r["id"] for r in records), reverse=True)
    for record in (exported, mem0, repeated, imported):
        assert record["actor"] == UNVERIFIED_ADMIN
        assert record["outcome"] == "complete" and record["final"] is True
        assert record["forgotten"] == {"short_term": 0, "medium_term": 0, "long_term": 0}
        assert record["signed_receipt"] is None
    assert exported["scope"] == {"level": "user", "principal": "bob", "agent": None,
                                 "session": None}  # fmt: skip
    assert exported["moved"] == kinds(body) and exported["source"] is None
    for record, answer, source in (
        (imported, first, "kaos"),
        (repeated, again, "kaos"),
        (mem0, from_mem0, "mem0"),
    ):
        assert record["scope"] == {"level": "store", "principal": None, "agent": None,
                                   "session": None}  # fmt: skip
        assert record["moved"] == moved(answer) and record["source"] == source
    # A forget reads as before: its erasure's counts, no transfer fields.
    assert forget["id"] == forgot["receipt"] and forget["forgotten"] == forgot["forgotten"]
    assert (forget["outcome"], forget["moved"], forget["source"]) == (None, None, None)
    assert forget["scope"]["principal"] == "alice"
    assert "marker" not in json.dumps(records)

    assert await audit(server, "&action=export") == [exported]
    assert await audit(server, "&action=import") == [mem0, repeated, imported]
    status, page, _ = await call(server.url, "/v1/audit", {"action": "forget", "limit": 1})
    assert status == 200 and page["records"] == [forget] and page["next_cursor"] is None
    status, doc, _ = await call(server.url, "/v1/audit?action=erase", method="GET")
    assert status == 400 and doc["error"]["code"] == "invalid_body", doc


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_import_refused_for_a_bad_line_leaves_a_failed_record_and_nothing_else(
    memory_factory: MakeMemory, backend: str
) -> None:
    server = memory_factory(backend, **SETTINGS)
    empty = counts(server)
    good = MEMORY.splitlines()
    broken = b"\n".join([*good[:4], b'{"kind": "fact", "id": "x"}', *good[5:]])
    status, doc = await import_(server, broken)
    assert status == 400 and doc["error"]["message"].startswith("line 5: "), doc
    assert counts(server) == empty
    (record,) = await audit(server)
    assert (record["action"], record["outcome"], record["final"]) == ("import", "failed", False)
    assert record["moved"] == NO_COUNTS and record["actor"] == UNVERIFIED_ADMIN
    assert server.db.relational("SELECT COUNT(*) FROM kaos_mem_audit") == [(1,)]


def refuse_transfer_records(server: MemoryServer) -> None:
    """Make the store fail every insert of a transfer's audit record (forgets still go in)."""
    if server.db.dsn is None:
        import sqlite3

        conn = sqlite3.connect(server.db.data_dir / "conversation.sqlite3", timeout=30)
        try:
            conn.execute(
                "CREATE TRIGGER kaos_test_refuse BEFORE INSERT ON kaos_mem_audit"
                " WHEN NEW.action <> 'forget' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
            conn.commit()
        finally:
            conn.close()
        return
    pg_query(
        server.db.dsn,
        "CREATE FUNCTION kaos_test_refuse() RETURNS trigger LANGUAGE plpgsql"
        " AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$;"
        " CREATE TRIGGER kaos_test_refuse BEFORE INSERT ON kaos_mem_audit FOR EACH ROW"
        " WHEN (NEW.action <> 'forget') EXECUTE FUNCTION kaos_test_refuse()",
    )


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_transfer_the_audit_cannot_record_is_refused_before_anything_moves(
    memory_factory: MakeMemory, backend: str
) -> None:
    server = memory_factory(backend, **SETTINGS)
    status, doc = await import_(server, MEMORY)
    assert status == 200, doc
    refuse_transfer_records(server)
    rows = counts(server)

    status, body = await export(server, {"level": "store"})
    assert status == 500, body
    assert json.loads(body)["error"]["code"] == "strict_failure"
    assert b"marker" not in body
    status, doc = await import_(server, MEMORY.replace(b"s-bob", b"s-new"))
    assert status == 500 and doc["error"]["code"] == "strict_failure", doc
    assert counts(server) == rows
    assert [r["action"] for r in await audit(server)] == ["import"]


async def export_and_hang_up(server: MemoryServer) -> bytes:
    """Start a store export, read its first bytes, and close the connection: a receive
    buffer kept small (no autotuning) makes the server's writes outrun it."""
    parts = urlsplit(server.url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (parts.hostname, parts.port))
    reader, writer = await asyncio.open_connection(sock=sock)
    body = b'{"level": "store"}'
    writer.write(
        b"POST /v1/export HTTP/1.1\r\nHost: memory\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    first = await reader.read(4096)
    writer.close()
    return head + first


@pytest.mark.parametrize("backend", BACKENDS)
async def test_an_export_whose_client_hangs_up_is_recorded_incomplete(
    memory_factory: MakeMemory, backend: str
) -> None:
    server = memory_factory(backend, **SETTINGS)
    # Far more than the socket buffers between the two ends hold.
    bulk = portable_file(*(turn("s-bulk", "bulk", f"{n:04d} " + "x" * 200_000) for n in range(60)))
    status, doc = await import_(server, bulk)
    assert status == 200 and doc["turns"] == 60, doc
    received = await export_and_hang_up(server)
    assert received.startswith(b"HTTP/1.1 200 ")

    async def exports() -> list[dict[str, Any]]:
        return await audit(server, "&action=export")

    (record,) = await eventually(
        exports, lambda r: r[0]["outcome"] != "started", what="the export's end recorded"
    )
    assert (record["outcome"], record["final"]) == ("incomplete", False)
    assert record["scope"]["level"] == "store" and record["actor"] == UNVERIFIED_ADMIN
    assert record["moved"]["turns"] < 60
