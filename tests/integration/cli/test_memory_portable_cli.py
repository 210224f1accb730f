"""``kaos memory export|import|migrate`` against real local memory services (``--url``): an
export file imported into a fresh store gives the same answers, a repeated import writes
nothing, migrate moves a store without a file, a Mem0 dump imports with its mapping, and
a refusal is one error line naming the line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from kaos_cli.main import main

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.integration.memory.portable.portable_http import counts
from tests.support.memory_http import AGENT_A, call, eventually, headers, seed_facts

SETTINGS: dict[str, Any] = {"token_budget": 200, "max_read_scope": "user"}


async def remembered(server: MemoryServer) -> None:
    for principal in ("alice", "bob"):
        ident = headers(agent=AGENT_A, principal=principal, session=f"s-{principal}")
        await seed_facts(server.url, ident, [f"{principal}-tea", f"{principal}-maps"])

    async def settled() -> tuple[int, int]:
        return server.db.outbox_depth(), len(server.db.folds())

    await eventually(settled, lambda v: v == (0, 2), what="both sessions folded")


async def listing(server: MemoryServer, principal: str) -> list[tuple[str, str | None]]:
    status, doc, _ = await call(
        server.url,
        "/v1/list",
        {"level": "user", "include": ["long_term"]},
        hdrs=headers(principal=principal),
    )
    assert status == 200, doc
    return [(f["text"], f["session_id"]) for f in doc["long_term"]["facts"]]


def kaos(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def test_export_import_and_migrate(
    memory_factory: MakeMemory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = memory_factory("local", **SETTINGS)
    asyncio.run(remembered(source))
    dump = tmp_path / "bob.jsonl"
    out = kaos(
        capsys, "memory", "export", "--url", source.url, "--principal", "bob", "-f", str(dump)
    )
    records = dump.read_bytes().splitlines()
    assert out == f"exported {len(records) - 1} records to {dump}\n"
    assert b"alice" not in dump.read_bytes()
    assert not (tmp_path / "bob.jsonl.partial").exists()

    target = memory_factory("local", **SETTINGS)
    doc = json.loads(kaos(capsys, "memory", "import", "--url", target.url, str(dump), "-o", "json"))
    assert doc["turns"] > 0 and doc["facts"] > 0 and doc["skipped"] == 0, doc
    assert asyncio.run(listing(target, "bob")) == asyncio.run(listing(source, "bob"))
    assert asyncio.run(listing(target, "alice")) == []
    rows = counts(target)
    table = kaos(capsys, "memory", "import", "--url", target.url, str(dump))
    assert table.splitlines()[0].split() == ["TURNS", "DIGESTS", "FACTS", "SKIPPED"]
    assert table.splitlines()[1].split() == ["0", "0", "0", str(len(records) - 1)]
    assert counts(target) == rows

    moved = memory_factory("local", **SETTINGS)
    doc = json.loads(
        kaos(
            capsys,
            "memory",
            "migrate",
            "--from-url",
            source.url,
            "--to-url",
            moved.url,
            "-o",
            "json",
        )
    )
    assert doc["skipped"] == 0, doc
    for principal in ("alice", "bob"):
        assert asyncio.run(listing(moved, principal)) == asyncio.run(listing(source, principal))


def test_a_mem0_dump_and_a_refusal(
    memory_factory: MakeMemory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = memory_factory("local", **SETTINGS)
    dump = tmp_path / "mem0.json"
    memory = {
        "id": "7f8c1f0e-1b9e-4d7e-9a51-1c1b1ad1e0a1",
        "memory": "Prefers window seats",
        "hash": "x",
        "metadata": None,
        "created_at": "2026-01-02T03:04:05.000000-08:00",
        "updated_at": None,
        "user_id": "carol",
        "agent_id": "travel",
    }
    dump.write_text(json.dumps({"results": [memory]}))
    kaos(
        capsys,
        "memory",
        "import",
        "--url",
        server.url,
        str(dump),
        "--from",
        "mem0",
        "--map",
        "agent=kaos://agent/team/{agent_id}",
        "--map",
        "default_session=legacy",
    )
    assert asyncio.run(listing(server, "carol")) == [("Prefers window seats", "legacy")]

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"kind": "header"}\n')
    rows = counts(server)
    assert main(["memory", "import", "--url", server.url, str(broken)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: memory service refused (400 invalid_line): line 1: "), err
    assert len(err.splitlines()) == 1
    assert counts(server) == rows
    assert main(["memory", "import", "--url", server.url, str(dump), "--map", "agent=x"]) == 2
    assert "--map is for --from mem0" in capsys.readouterr().err
