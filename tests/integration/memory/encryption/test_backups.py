"""Backups and snapshots of a sealed store: no text of a principal is in any of their files,
and a restored copy serves everything that was not erased.

Alice and bob write through every tier (window turns, digest versions, extracted facts,
Mem0's message context). A copy is taken (local mode: the data dir, as a volume snapshot
would; external mode: ``pg_dump`` and the PostgreSQL data directory), then alice forgets at
user level. No file of any copy holds a marker of alice or bob: the texts were never
written in the clear. Each copy restored into a fresh service with the same Secret KEK
serves bob's memory whole.

With the Secret KEK a restored copy also still holds alice's key row, wrapped by a KEK the
fresh service has, so her text opens there again; that half (a restore that cannot read
alice) needs a KEK outside the database that the forget destroys: the KMS backend
(``tests/integration/memory/kms``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.memory import MakeMemory
from tests.integration.memory.encryption.support import (
    SETTINGS,
    Owner,
    fact_rows,
    files_with,
    make_kek,
    owner,
    pg_tool,
    readable,
    write_memory,
)
from tests.support.memory_http import call
from tests.support.pg_instance import PgInstance, make_instance


async def _forget(url: str, who: Owner) -> dict[str, Any]:
    status, doc, _ = await call(url, "/v1/forget", {"level": "user"}, hdrs=who.ident)
    assert status == 200, doc
    assert doc["degraded"] is False, doc
    return doc


async def test_local_snapshot_holds_no_text_and_restores(
    memory_factory: MakeMemory, tmp_path: Path
) -> None:
    kek = make_kek(tmp_path / "kek")
    server = memory_factory("local", encryption_kek_dir=str(kek), **SETTINGS)
    alice, bob = owner("alice"), owner("bob")
    await write_memory(server, alice)
    await write_memory(server, bob)

    # A volume snapshot of the live store: every file of the data dir, as it is.
    snapshot = tmp_path / "snapshot"
    shutil.copytree(server.db.data_dir, snapshot)
    assert fact_rows(server, alice)
    doc = await _forget(server.url, alice)
    assert doc["forgotten"]["long_term"] >= len(alice.folded)
    # The rows go too, though their key went first: nothing is left for a later restore.
    assert fact_rows(server, alice) == []
    assert await readable(server, alice) == []
    assert await readable(server, bob) == bob.markers

    assert files_with(snapshot, alice.markers + bob.markers) == {}
    server.proc.kill()

    restored = memory_factory(
        "local", encryption_kek_dir=str(kek), data_dir=str(snapshot), **SETTINGS
    )
    assert await readable(restored, bob) == bob.markers
    assert files_with(snapshot, alice.markers + bob.markers) == {}


async def test_without_a_kek_the_snapshot_holds_the_text(
    memory_factory: MakeMemory, tmp_path: Path
) -> None:
    """The threat the sealing answers, and proof the file scan finds text where it is."""
    server = memory_factory("local", encryption="off", **SETTINGS)
    bob = owner("bob")
    await write_memory(server, bob)
    hits = files_with(server.db.data_dir, bob.markers)
    assert {"conversation.sqlite3-wal", "chroma/chroma.sqlite3", "mem0/history.db"} & set(hits)
    assert set(bob.markers) == {m for found in hits.values() for m in found}


@pytest.mark.postgres
async def test_external_dump_and_data_directory_hold_no_text_and_restore(
    memory_factory: MakeMemory, tmp_path: Path, private_postgres: PgInstance
) -> None:
    kek = make_kek(tmp_path / "kek")
    dsn = private_postgres.create_database("store")
    server = memory_factory("external", encryption_kek_dir=str(kek), dsn=dsn, **SETTINGS)
    alice, bob = owner("alice"), owner("bob")
    await write_memory(server, alice)
    await write_memory(server, bob)

    dump = tmp_path / "dump" / "store.dump"
    dump.parent.mkdir()
    pg_tool("pg_dump", "--format=custom", f"--file={dump}", dsn)
    # The data directory as a physical backup (or a replica) holds it: pages and WAL.
    copy = make_instance()
    try:
        shutil.rmtree(copy.data)
        pg_tool(
            "pg_basebackup",
            f"--pgdata={copy.data}",
            f"--dbname={private_postgres.admin_dsn}",
            "--wal-method=stream",
            "--checkpoint=fast",
        )
        assert fact_rows(server, alice)
        doc = await _forget(server.url, alice)
        assert doc["forgotten"]["long_term"] >= len(alice.folded)
        assert fact_rows(server, alice) == []
        assert await readable(server, alice) == []
        assert await readable(server, bob) == bob.markers

        every = alice.markers + bob.markers
        assert files_with(dump.parent, every) == {}
        assert files_with(copy.data, every) == {}
        server.proc.kill()

        # The dump restored into a fresh database, and the data directory started as a
        # server of its own: a fresh service over each serves bob's memory whole.
        fresh = private_postgres.create_database("restored")
        pg_tool("pg_restore", "--no-owner", f"--dbname={fresh}", str(dump))
        from_dump = memory_factory("external", encryption_kek_dir=str(kek), dsn=fresh, **SETTINGS)
        assert await readable(from_dump, bob) == bob.markers
        from_dump.proc.kill()

        _own(copy)
        copy.start()
        from_files = memory_factory(
            "external", encryption_kek_dir=str(kek), dsn=copy.dsn("store"), **SETTINGS
        )
        assert await readable(from_files, bob) == bob.markers
        from_files.proc.kill()
    finally:
        copy.destroy()


def _own(instance: PgInstance) -> None:
    """Hand a data directory written by root to the server's OS user, as initdb leaves it."""
    if os.geteuid() != 0:
        return
    for path in [instance.data, *instance.data.rglob("*")]:
        shutil.chown(path, "postgres", "postgres")
    instance.data.chmod(0o700)
