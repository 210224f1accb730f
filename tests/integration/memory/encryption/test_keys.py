"""The data keys over a service's life: KEK rotation keeps every record readable, a record
whose key is gone reads as erased (never an error), and a principal's forget removes its key
row with the tombstone while other owners keep theirs."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from tests.fixtures.memory import MakeMemory
from tests.integration.memory.encryption.support import (
    SETTINGS,
    Owner,
    make_kek,
    owner,
    readable,
    rotate_kek,
    write_memory,
)
from tests.support.memory_http import call


@pytest.mark.parametrize("backend", ["local", pytest.param("external", marks=pytest.mark.postgres)])
async def test_rotating_the_kek_keeps_every_record_readable(
    memory_factory: MakeMemory, tmp_path: Path, backend: str
) -> None:
    kek = make_kek(tmp_path / "kek")
    data_dir = tmp_path / "data"
    first = memory_factory(backend, encryption_kek_dir=str(kek), data_dir=str(data_dir), **SETTINGS)
    dsn = first.db.dsn
    alice = owner("alice")
    await write_memory(first, alice)

    # The Secret gains v2 and makes it current, under the running service: a new owner's
    # key is wrapped with v2 at once, alice's stays wrapped with v1.
    rotate_kek(kek, "v2")
    bob = owner("bob")
    await write_memory(first, bob)
    wrapped = dict(first.db.relational("SELECT owner, kek_id FROM kaos_mem_keys"))
    assert wrapped[f"principal:{alice.principal}"] == "secret:v1"
    assert wrapped[f"principal:{bob.principal}"] == "secret:v2"
    first.proc.kill()

    # A fresh process (nothing cached) reads both through the rotated Secret.
    again = memory_factory(
        backend, encryption_kek_dir=str(kek), data_dir=str(data_dir), dsn=dsn, **SETTINGS
    )
    assert await readable(again, alice) == alice.markers
    assert await readable(again, bob) == bob.markers


async def test_a_record_whose_key_is_gone_reads_as_erased(
    memory_factory: MakeMemory, tmp_path: Path
) -> None:
    kek = make_kek(tmp_path / "kek")
    data_dir = tmp_path / "data"
    first = memory_factory("local", encryption_kek_dir=str(kek), data_dir=str(data_dir), **SETTINGS)
    alice, bob = owner("alice"), owner("bob")
    await write_memory(first, alice)
    await write_memory(first, bob)
    first.proc.kill()
    # What a restore with the key row gone looks like: the rows are there, the key is not.
    with contextlib.closing(sqlite3.connect(data_dir / "conversation.sqlite3")) as conn:
        conn.execute("DELETE FROM kaos_mem_keys WHERE owner = ?", (f"principal:{alice.principal}",))
        conn.commit()

    again = memory_factory("local", encryption_kek_dir=str(kek), data_dir=str(data_dir), **SETTINGS)
    status, doc, _ = await call(
        again.url, "/v1/recall", {"level": "session", "query": "anything"}, hdrs=alice.ident
    )
    assert status == 200, doc
    assert doc["degraded"] is False, doc
    assert await readable(again, alice) == []
    assert await readable(again, bob) == bob.markers


async def test_a_principal_forget_deletes_only_that_principal_key(
    memory_factory: MakeMemory, tmp_path: Path
) -> None:
    kek = make_kek(tmp_path / "kek")
    server = memory_factory("local", encryption_kek_dir=str(kek), **SETTINGS)
    alice, bob = owner("alice"), owner("bob")
    await write_memory(server, alice)
    await write_memory(server, bob)

    status, doc, _ = await call(server.url, "/v1/forget", {"level": "session"}, hdrs=bob.ident)
    assert status == 200, doc
    status, doc, _ = await call(server.url, "/v1/forget", {"level": "user"}, hdrs=alice.ident)
    assert status == 200, doc
    owners = {r[0] for r in server.db.relational("SELECT owner FROM kaos_mem_keys")}
    # A session-level forget keeps bob's key (row erasure only); alice's user-level forget
    # shredded hers.
    assert f"principal:{bob.principal}" in owners
    assert f"principal:{alice.principal}" not in owners

    # Alice writes again: a new key, and what she writes now is hers to read.
    again = owner("alice")
    fresh = Owner(alice.principal, again.session, again.folded, again.window)
    await write_memory(server, fresh)
    assert await readable(server, fresh) == fresh.markers


@pytest.mark.postgres
async def test_a_replica_that_cached_a_shredded_key_writes_under_the_new_one(
    memory_factory: MakeMemory, tmp_path: Path, pg_dsn: str
) -> None:
    kek = make_kek(tmp_path / "kek")
    first, second = (
        memory_factory("external", encryption_kek_dir=str(kek), dsn=pg_dsn, **SETTINGS)
        for _ in range(2)
    )
    alice = owner("alice")
    status, doc, _ = await call(
        first.url, "/v1/write", {"turns": [{"role": "user", "content": "before"}]}, hdrs=alice.ident
    )
    assert status in (200, 202), doc
    # The forget on the other replica deletes the key the first one holds in memory.
    status, doc, _ = await call(second.url, "/v1/forget", {"level": "user"}, hdrs=alice.ident)
    assert status == 200 and doc["degraded"] is False, doc

    status, doc, _ = await call(
        first.url,
        "/v1/write",
        {"turns": [{"role": "user", "content": f"after {alice.window}"}]},
        hdrs=alice.ident,
    )
    assert status in (200, 202), doc
    owners = [r[0] for r in first.db.relational("SELECT owner FROM kaos_mem_keys")]
    assert owners == [f"principal:{alice.principal}"]
    # Written under the new key: every replica reads it.
    status, doc, _ = await call(
        second.url, "/v1/recall", {"level": "session", "query": "after"}, hdrs=alice.ident
    )
    assert status == 200, doc
    assert alice.window in json.dumps(doc["short_term"])
    assert "before" not in json.dumps(doc["short_term"])
