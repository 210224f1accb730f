"""With a KMS KEK, a copy restored after a forget does not open the forgotten principal.

The copy (the local data dir, or a ``pg_dump``) still holds alice's key row, wrapped by her
KMS key; her forget destroyed that KMS key, so no copy, restored anywhere with the same KMS,
unwraps it: through every API she reads as erased, while bob reads everything. The same
copies with the Secret KEK open alice again (``test_backups``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fixtures.memory import MakeMemory
from tests.integration.memory.encryption.support import (
    SETTINGS,
    files_with,
    owner,
    pg_tool,
    readable,
    write_memory,
)
from tests.support.kms import LocalKms
from tests.support.memory_http import call
from tests.support.pg_instance import PgInstance


async def test_a_restored_snapshot_reads_the_forgotten_principal_as_erased(
    memory_factory: MakeMemory, tmp_path: Path, kms: LocalKms
) -> None:
    server = memory_factory("local", **kms.memory_settings(), **SETTINGS)
    alice, bob = owner("alice"), owner("bob")
    await write_memory(server, alice)
    await write_memory(server, bob)
    snapshot = tmp_path / "snapshot"
    shutil.copytree(server.db.data_dir, snapshot)

    status, doc, _ = await call(server.url, "/v1/forget", {"level": "user"}, hdrs=alice.ident)
    assert status == 200 and doc["degraded"] is False, doc
    server.proc.kill()
    assert files_with(snapshot, alice.markers + bob.markers) == {}

    restored = memory_factory("local", data_dir=str(snapshot), **kms.memory_settings(), **SETTINGS)
    status, doc, _ = await call(
        restored.url, "/v1/recall", {"level": "session", "query": "x"}, hdrs=alice.ident
    )
    assert status == 200 and doc["degraded"] is False, doc
    assert await readable(restored, alice) == []
    assert await readable(restored, bob) == bob.markers


@pytest.mark.postgres
async def test_a_restored_dump_reads_the_forgotten_principal_as_erased(
    memory_factory: MakeMemory, tmp_path: Path, kms: LocalKms, private_postgres: PgInstance
) -> None:
    dsn = private_postgres.create_database("store")
    server = memory_factory("external", dsn=dsn, **kms.memory_settings(), **SETTINGS)
    alice, bob = owner("alice"), owner("bob")
    await write_memory(server, alice)
    await write_memory(server, bob)
    dump = tmp_path / "store.dump"
    pg_tool("pg_dump", "--format=custom", f"--file={dump}", dsn)

    status, doc, _ = await call(server.url, "/v1/forget", {"level": "user"}, hdrs=alice.ident)
    assert status == 200 and doc["degraded"] is False, doc
    server.proc.kill()

    fresh = private_postgres.create_database("restored")
    pg_tool("pg_restore", "--no-owner", f"--dbname={fresh}", str(dump))
    restored = memory_factory("external", dsn=fresh, **kms.memory_settings(), **SETTINGS)
    assert await readable(restored, alice) == []
    assert await readable(restored, bob) == bob.markers
