"""The conversational tables' schema version and migrations, on both backends.

A database comes out of ``start`` at the latest version whether it was empty, created by
the code before versions existed (tables, no version row), or left at the previous
version; the rows it held survive.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from kaos_memory.scope import Attribution
from kaos_memory.storage.base import FoldPolicy, NewTurn
from kaos_memory.storage.sql import schema
from kaos_memory.storage.sql.dialect import Dialect, Tx
from kaos_memory.storage.sql.store import SqlConversationStore

from tests.support.storage import window_rows

WHO = Attribution(group="g", session="s1", principal="alice", agent=None)
NO_FOLD = FoldPolicy(trigger_tokens=10_000, target_tokens=10, max_events=10_000)

MakeDialect = Callable[[], Dialect]


@pytest.fixture(params=["local", pytest.param("external", marks=pytest.mark.postgres)])
def make_dialect(request: pytest.FixtureRequest, tmp_path: Path) -> MakeDialect:
    """New dialect objects over one database (each store needs its own)."""
    if request.param == "local":
        from kaos_memory.storage.sql.sqlite import SqliteDialect

        return lambda: SqliteDialect(tmp_path / "conversation.sqlite3")
    from kaos_memory.storage.sql.postgres import PostgresDialect

    dsn = request.getfixturevalue("pg_dsn")
    return lambda: PostgresDialect(dsn, pool_size=1)


async def _store(make_dialect: MakeDialect) -> SqlConversationStore:
    store = SqlConversationStore(make_dialect())
    await store.start()
    return store


def _prepare(dialect: Dialect, upto: tuple[schema.Migration, ...], *, versioned: bool) -> None:
    """Leave the database as code that knew only ``upto`` would have."""
    dialect.open()
    try:
        with dialect.transaction() as cur:
            tx = Tx(cur, dialect, 0.0)
            if versioned:
                schema.migrate(tx, upto)
            else:  # before the version row existed: the tables only
                for migration in upto:
                    for stmt in migration.ddl(dialect.types):
                        tx.execute(stmt)
            if upto:  # a session the old code wrote, which the migration must keep
                tx.execute(
                    "INSERT INTO kaos_mem_sessions (key, grp, session, last_at, flushed)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    ("old-key", "g", "old", "2000-01-01T00:00:00+00:00", False),
                )
    finally:
        dialect.close()


def _version(make_dialect: MakeDialect) -> int:
    """The version the tables are at, read on a dialect of its own."""
    dialect = make_dialect()
    dialect.open()
    try:
        with dialect.transaction() as cur:
            return schema.version(Tx(cur, dialect, 0.0))
    finally:
        dialect.close()


@pytest.fixture
async def closing() -> AsyncIterator[list[SqlConversationStore]]:
    stores: list[SqlConversationStore] = []
    try:
        yield stores
    finally:
        for store in stores:
            await store.close()


def test_migrations_are_numbered_in_order() -> None:
    assert [m.version for m in schema.MIGRATIONS] == list(range(1, len(schema.MIGRATIONS) + 1))
    assert len(schema.MIGRATIONS) == schema.LATEST


async def test_an_empty_database_comes_out_at_the_latest_version(
    make_dialect: MakeDialect, closing: list[SqlConversationStore]
) -> None:
    store = await _store(make_dialect)
    closing.append(store)
    assert _version(make_dialect) == schema.LATEST
    await store.append(WHO, [NewTurn("user", "hello", 3)], True, NO_FOLD)
    assert [t.content for t in await window_rows(store, WHO.key, 10)] == ["hello"]


async def test_a_database_at_the_latest_version_starts_again_unchanged(
    make_dialect: MakeDialect, closing: list[SqlConversationStore]
) -> None:
    first = await _store(make_dialect)
    await first.append(WHO, [NewTurn("user", "kept", 3)], True, NO_FOLD)
    await first.close()
    again = await _store(make_dialect)
    closing.append(again)
    assert _version(make_dialect) == schema.LATEST
    assert [t.content for t in await window_rows(again, WHO.key, 10)] == ["kept"]


@pytest.mark.parametrize("versioned", [True, False], ids=["previous-version", "unversioned"])
async def test_an_older_database_is_migrated_to_the_latest_version(
    make_dialect: MakeDialect, closing: list[SqlConversationStore], versioned: bool
) -> None:
    # The previous version (N-1), or unversioned: the tables as the code before versions
    # created them (version 0 with the version-1 tables in place; only version 1 is
    # written to be re-run over existing tables).
    upto = schema.MIGRATIONS[:-1] if versioned else schema.MIGRATIONS[:1]
    _prepare(make_dialect(), upto, versioned=versioned)
    store = await _store(make_dialect)
    closing.append(store)
    assert _version(make_dialect) == schema.LATEST
    await store.append(WHO, [NewTurn("user", "after", 3)], True, NO_FOLD)
    assert [t.content for t in await window_rows(store, WHO.key, 10)] == ["after"]
    idle = await store.idle_sessions("2001-01-01T00:00:00+00:00", 10)
    assert [i.key for i in idle] == (["old-key"] if upto else []), "old rows survive"


async def test_an_audit_from_before_transfers_reads_as_forgets(
    make_dialect: MakeDialect, closing: list[SqlConversationStore]
) -> None:
    # Version 8: the audit held erasures only, with no column saying so.
    before = tuple(m for m in schema.MIGRATIONS if m.version < 9)
    _prepare(make_dialect(), before, versioned=True)
    dialect = make_dialect()
    dialect.open()
    try:
        with dialect.transaction() as cur:
            tx = Tx(cur, dialect, 0.0)
            erasure = tx.one(
                "INSERT INTO kaos_mem_erasures (grp, level, principal, erased_at, done_at)"
                " VALUES (%s, %s, %s, %s, %s) RETURNING id",
                ("g", "user", "bob", 10.0, 11.0),
            )
            tx.execute(
                "INSERT INTO kaos_mem_audit (erasure_id, grp, at, actor_kind, actor, verified,"
                " level, principal, short_term, medium_term, long_term)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (erasure[0], "g", 10.0, "admin", "ops", True, "user", "bob", 3, 1, 2),
            )
    finally:
        dialect.close()
    store = await _store(make_dialect)
    closing.append(store)
    assert _version(make_dialect) == schema.LATEST
    (old,) = await store.audit("g", 10, None)
    assert (old.action, old.outcome, old.skipped, old.source) == ("forget", None, 0, None)
    assert (old.level, old.principal, old.final) == ("user", "bob", True)
    assert (old.short_term, old.medium_term, old.long_term) == (3, 1, 2)
    assert [e.id for e in await store.audit("g", 10, None, "forget")] == [old.id]
    assert await store.audit("g", 10, None, "export") == []
