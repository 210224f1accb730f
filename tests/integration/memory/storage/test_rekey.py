"""A principal's session written under the shared key form (schema version 7 and before)
moves to the principal's own key at start, in the clear and sealed, on both backends: its
owner reads the same window and digest after, another principal's session of the same id
stays apart, and starting again changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from kaos_memory.crypto.kek import SecretFileKek, new_kek_version
from kaos_memory.scope import Attribution, conversation_key
from kaos_memory.storage.base import FoldPolicy, NewTurn, SessionBound, SessionRead
from kaos_memory.storage.sql.dialect import Dialect, Tx
from kaos_memory.storage.sql.store import SqlConversationStore

GROUP = "g"
# The first write folds its two turns (the digest's), the second stays in the window.
FOLD_FIRST = FoldPolicy(trigger_tokens=5, target_tokens=1, max_events=10_000)
NO_FOLD = FoldPolicy(trigger_tokens=10_000, target_tokens=10, max_events=10_000)

MakeDialect = Callable[[], Dialect]


@dataclass(frozen=True)
class SharedKeyAttribution(Attribution):
    """An attribution keyed as the code before version 8 keyed every session."""

    @property
    def key(self) -> str:
        return f"kaos_group:{self.group}|run:{self.session}"


def shared(session: str) -> str:
    return f"kaos_group:{GROUP}|run:{session}"


@pytest.fixture(params=["local", pytest.param("external", marks=pytest.mark.postgres)])
def make_dialect(request: pytest.FixtureRequest, tmp_path: Path) -> MakeDialect:
    if request.param == "local":
        from kaos_memory.storage.sql.sqlite import SqliteDialect

        return lambda: SqliteDialect(tmp_path / "conversation.sqlite3")
    from kaos_memory.storage.sql.postgres import PostgresDialect

    dsn = request.getfixturevalue("pg_dsn")
    return lambda: PostgresDialect(dsn, pool_size=2)


def make_kek(root: Path) -> SecretFileKek:
    root.mkdir(exist_ok=True)
    (root / "v1").write_text(new_kek_version())
    (root / "current").write_text("v1")
    kek = SecretFileKek(root)
    kek.load()
    return kek


async def started(make_dialect: MakeDialect, kek: SecretFileKek | None) -> SqlConversationStore:
    store = SqlConversationStore(make_dialect())
    if kek is not None:
        store.encrypt(GROUP, kek, 64)
    await store.start()
    return store


def raw(make_dialect: MakeDialect, query: str, params: tuple[object, ...] = ()) -> list[tuple]:
    dialect = make_dialect()
    dialect.open()
    try:
        with dialect.transaction() as cur:
            return list(Tx(cur, dialect, 0.0).all(query, params))
    finally:
        dialect.close()


def back_to_version_7(make_dialect: MakeDialect) -> None:
    """Leave the tables as the code before version 8 left them."""
    dialect = make_dialect()
    dialect.open()
    try:
        with dialect.transaction() as cur:
            tx = Tx(cur, dialect, 0.0)
            tx.execute("DROP TABLE kaos_mem_rekeys")
            # Migration 9's audit columns go too, or it would add them a second time.
            for column in ("action", "outcome", "skipped", "source"):
                tx.execute(f"ALTER TABLE kaos_mem_audit DROP COLUMN {column}")
            # And migration 10's turn origin.
            tx.execute("ALTER TABLE kaos_mem_turns DROP COLUMN source")
            tx.execute("DELETE FROM kaos_mem_schema")
            tx.execute("INSERT INTO kaos_mem_schema (version) VALUES (7)")
    finally:
        dialect.close()


async def write_shared(store: SqlConversationStore, who: Attribution, words: str) -> None:
    """Two folded turns with a digest, then one turn in the window, under the shared key."""
    folded = [NewTurn("user", f"{words} one " * 4, 8), NewTurn("assistant", f"{words} two", 2)]
    appended = await store.append(who, folded, False, FOLD_FIRST)
    assert appended.fold_id is not None
    assert await store.add_digest(who.key, f"{words} digest", [appended.fold_id], 5) == 1
    await store.append(who, [NewTurn("user", f"{words} window", 2)], False, NO_FOLD)


async def session(store: SqlConversationStore, key: str, principal: str | None) -> SessionRead:
    return await store.read_session(key, principal, 50, turns=True, digest=True)


@pytest.mark.parametrize("sealed", [False, True], ids=["clear", "sealed"])
async def test_a_principals_shared_key_session_moves_to_its_own_key(
    make_dialect: MakeDialect, tmp_path: Path, sealed: bool
) -> None:
    kek = make_kek(tmp_path / "kek") if sealed else None
    alice = SharedKeyAttribution(GROUP, "alice-1", "alice", "kaos://agent/t/a")
    anonymous = SharedKeyAttribution(GROUP, "open-1", None, "kaos://agent/t/a")
    old = await started(make_dialect, kek)
    try:
        await write_shared(old, alice, "alicewords")
        await write_shared(old, anonymous, "openwords")
    finally:
        await old.close()
    back_to_version_7(make_dialect)
    if sealed:  # the texts were sealed to the shared key's records
        stored = raw(make_dialect, "SELECT content FROM kaos_mem_turns")
        assert stored and not any("words" in c for (c,) in stored)

    new = await started(make_dialect, kek)
    try:
        own = conversation_key(GROUP, "alice-1", "alice")
        read = await session(new, own, "alice")
        assert [t.content for t in read.turns] == ["alicewords window"]
        assert read.digest is not None and read.digest.summary == "alicewords digest"
        assert (await session(new, shared("alice-1"), None)).turns == []
        # Bob's "alice-1" is another conversation: nothing of alice's, and his own works.
        assert (await session(new, conversation_key(GROUP, "alice-1", "bob"), "bob")).turns == []
        # A session nobody's principal wrote to keeps the shared key.
        open_read = await session(new, shared("open-1"), None)
        assert [t.content for t in open_read.turns] == ["openwords window"]
        assert open_read.digest is not None and open_read.digest.summary == "openwords digest"
        # Every row of alice's session moved: none is left under the shared key.
        for table in ("turns", "digests", "folds", "attribution", "sessions"):
            left = raw(
                make_dialect,
                f"SELECT COUNT(*) FROM kaos_mem_{table} WHERE key = %s",
                (shared("alice-1"),),
            )
            assert left == [(0,)], table
        assert raw(make_dialect, "SELECT COUNT(*) FROM kaos_mem_rekeys") == [(0,)]
    finally:
        await new.close()

    again = await started(make_dialect, kek)  # nothing left to move: nothing changes
    try:
        own = conversation_key(GROUP, "alice-1", "alice")
        read = await session(again, own, "alice")
        assert read.digest is not None and read.digest.summary == "alicewords digest"
        # The fold work reads the moved turns too (a fold's turns open under its key).
        folded = await again.flush_session(own, "alice-1", "9999")
        assert folded is not None and [t.content for t in folded.turns] == ["alicewords window"]
    finally:
        await again.close()


async def test_a_shared_key_session_of_several_principals_stays_closed(
    make_dialect: MakeDialect,
) -> None:
    """Written before sessions were bound: no one principal's conversation, so it is not
    handed to either, and nobody can write into it any more."""
    alice = SharedKeyAttribution(GROUP, "mixed", "alice", None)
    old = await started(make_dialect, None)
    try:
        await write_shared(old, alice, "alicewords")
    finally:
        await old.close()
    back_to_version_7(make_dialect)
    dialect = make_dialect()
    dialect.open()
    try:
        with dialect.transaction() as cur:
            Tx(cur, dialect, 0.0).execute(
                "INSERT INTO kaos_mem_attribution (key, grp, session, principal, agent)"
                " VALUES (%s, %s, %s, %s, %s)",
                (shared("mixed"), GROUP, "mixed", "bob", ""),
            )
    finally:
        dialect.close()

    new = await started(make_dialect, None)
    try:
        assert raw(make_dialect, "SELECT COUNT(*) FROM kaos_mem_rekeys") == [(0,)]
        kept = await session(new, shared("mixed"), "alice")
        assert [t.content for t in kept.turns] == ["alicewords window"]
        for principal in ("alice", "bob"):
            own = conversation_key(GROUP, "mixed", principal)
            assert (await session(new, own, principal)).turns == []
        nobody = SharedKeyAttribution(GROUP, "mixed", None, "kaos://agent/t/a")
        with pytest.raises(SessionBound):
            await new.append(nobody, [NewTurn("user", "in", 1)], False, NO_FOLD)
    finally:
        await new.close()
