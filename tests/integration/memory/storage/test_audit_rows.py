"""The audit in the conversation store, on both backends.

Driven through ``SqlConversationStore`` with a ``FakeClock``: an erasure writes its audit
record in the tombstone's transaction (who, when, the scope, rows per tier), the facts
are added to it afterwards, it becomes final with the tombstone, and the listing pages
newest first within the store group. No record holds any erased text. An export or import
is recorded ``started`` and then updated with how it ended; neither kind of record is
reached by the other's updates, and the listing filters by action.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kaos_memory.scope import Attribution, Scope
from kaos_memory.storage.audit import Actor, Moved, Transfer
from kaos_memory.storage.base import ErasureSelector, FoldPolicy, NewTurn
from kaos_memory.storage.sql.store import SqlConversationStore

from tests.support.clock import FakeClock
from tests.support.storage import window_rows

NO_FOLD = FoldPolicy(trigger_tokens=10_000, target_tokens=10, max_events=10_000)
AGENT = "kaos://agent/a/b"
BOB_1 = Attribution(group="g", session="s1", principal="bob", agent=AGENT)
BOB_2 = Attribution(group="g", session="s2", principal="bob", agent="kaos://agent/a/c")
ALICE = Attribution(group="g", session="s3", principal="alice", agent=AGENT)
BOB = Scope(level="user", group="g", session=None, principal="bob", agent=None)
ADMIN = Actor(kind="admin", name="system:serviceaccount:ops:eraser", verified=True)


@pytest.fixture(params=["local", pytest.param("external", marks=pytest.mark.postgres)])
async def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[SqlConversationStore]:
    clock = FakeClock()
    if request.param == "local":
        from kaos_memory.storage.sql.sqlite import SqliteDialect

        s = SqlConversationStore(SqliteDialect(tmp_path / "conversation.sqlite3"), clock=clock)
    else:
        from kaos_memory.storage.sql.postgres import PostgresDialect
        from kaos_memory.storage.sql.schema import LATEST

        dsn = request.getfixturevalue("pg_dsn")
        s = SqlConversationStore(PostgresDialect(dsn, pool_size=2), clock=clock)
        assert LATEST >= 4
    await s.start()
    try:
        yield s
    finally:
        await s.close()


async def write(store: SqlConversationStore, who: Attribution, n: int) -> None:
    turns = [NewTurn("user", f"secret of {who.principal} {i}", 10) for i in range(n)]
    await store.append(who, turns, True, NO_FOLD)


async def test_an_erasure_is_recorded_with_its_actor_scope_and_counts(
    store: SqlConversationStore,
) -> None:
    await write(store, BOB_1, 3)
    await write(store, BOB_2, 2)
    await write(store, ALICE, 4)
    erased = await store.erase(ErasureSelector(group="g", principal="bob"), BOB, "e", 60, ADMIN)
    assert erased.turns == 5 and erased.audit_id is not None
    assert erased.tombstone is not None
    await store.add_erased_facts(erased.tombstone.id, 7)

    (entry,) = await store.audit("g", 10, None)
    assert entry.id == erased.audit_id
    assert entry.actor == ADMIN
    assert (entry.level, entry.principal, entry.agent, entry.session) == ("user", "bob", None, None)
    assert (entry.short_term, entry.medium_term, entry.long_term) == (5, 0, 7)
    assert entry.final is False
    assert await store.finish_erasure(erased.tombstone, "e")
    (entry,) = await store.audit("g", 10, None)
    assert entry.final is True
    # Alice's turns are untouched; another group sees no record.
    assert len(await window_rows(store, ALICE.key, 10)) == 4
    assert await store.audit("other", 10, None) == []


async def test_the_audit_pages_newest_first(store: SqlConversationStore) -> None:
    ids = []
    for i in range(5):
        scope = Scope(level="session", group="g", session=f"s{i}", principal=None, agent=None)
        erased = await store.erase(None, scope, f"e{i}", 60)
        ids.append(erased.audit_id)
    first = await store.audit("g", 2, None)
    assert [e.id for e in first] == ids[::-1][:2]
    assert all(e.actor.kind == "unknown" and not e.actor.verified for e in first)
    rest = await store.audit("g", 10, first[-1].id)
    assert [e.id for e in rest] == ids[::-1][2:]


async def test_transfers_are_recorded_started_then_ended_beside_the_erasures(
    store: SqlConversationStore,
) -> None:
    await write(store, BOB_1, 2)
    export = Transfer(action="export", actor=ADMIN, level="user", principal="bob")
    export_id = await store.record_transfer("g", export)
    (started,) = await store.audit("g", 10, None)
    assert (started.id, started.action, started.outcome) == (export_id, "export", "started")
    assert started.erasure_id == 0 and started.final is False
    assert (started.level, started.principal, started.agent) == ("user", "bob", None)
    assert (started.short_term, started.medium_term, started.long_term, started.skipped) == (
        0, 0, 0, 0,
    )  # fmt: skip

    erased = await store.erase(ErasureSelector(group="g", principal="bob"), BOB, "e", 60, ADMIN)
    assert erased.tombstone is not None and erased.audit_id is not None
    imported = Transfer(action="import", actor=ADMIN, level="store", source="mem0")
    import_id = await store.record_transfer("g", imported)
    await store.update_transfer(export_id, "complete", Moved(turns=2, digests=1, facts=3))
    await store.update_transfer(import_id, "failed", Moved(facts=4, skipped=5))
    # Neither an erasure's fact count nor a transfer's end reaches the other kind.
    await store.add_erased_facts(erased.tombstone.id, 6)
    await store.update_transfer(erased.audit_id, "complete", Moved(turns=99))
    assert await store.finish_erasure(erased.tombstone, "e")

    listed = await store.audit("g", 10, None)
    assert [(e.id, e.action) for e in listed] == [
        (import_id, "import"),
        (erased.audit_id, "forget"),
        (export_id, "export"),
    ]
    mem0, forget, done = listed
    assert (mem0.outcome, mem0.final, mem0.source, mem0.level) == ("failed", False, "mem0", "store")
    assert (mem0.long_term, mem0.skipped, mem0.principal) == (4, 5, None)
    assert (forget.outcome, forget.final, forget.skipped, forget.source) == (None, True, 0, None)
    assert (forget.short_term, forget.medium_term, forget.long_term) == (2, 0, 6)
    assert (done.outcome, done.final, done.actor) == ("complete", True, ADMIN)
    assert (done.short_term, done.medium_term, done.long_term, done.skipped) == (2, 1, 3, 0)

    assert [e.id for e in await store.audit("g", 10, None, "forget")] == [erased.audit_id]
    assert [e.id for e in await store.audit("g", 10, None, "import")] == [import_id]
    assert [e.id for e in await store.audit("g", 10, import_id, "export")] == [export_id]
    assert await store.audit("other", 10, None, "export") == []
