"""Mem0's message context as an erasure purges it: the erased conversations only.

Mem0's own history database (``SQLiteManager``) and its own session scope strings, so
the test pins how Mem0 names a scope as well as the purge. A session id is each
principal's own: alice's "alice-1" and bob's "alice-1" are two conversations.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kaos_memory.scope import Scope, conversation_key
from kaos_memory.storage.mem0.history import message_filter, purge_mem0_history
from kaos_memory.storage.mem0.terms import to_entity_id
from mem0.memory.main import _build_session_scope
from mem0.memory.storage import SQLiteManager

GROUP = "g"
SESSION = "alice 1"  # with a space: entity ids are escaped in Mem0's scope


def scope_of(session: str, principal: str | None, agent: str = "agent-a") -> str:
    ids = {"run_id": to_entity_id(session), "agent_id": to_entity_id(agent)}
    if principal is not None:
        ids["user_id"] = to_entity_id(principal)
    return str(_build_session_scope(ids))


@pytest.fixture
def db() -> Iterator[Any]:
    manager = SQLiteManager(":memory:")
    for principal in ("alice", "bob", None):
        manager.save_messages(
            [{"role": "user", "content": f"{principal} says hi"}], scope_of(SESSION, principal)
        )
    manager.save_messages([{"role": "user", "content": "bob elsewhere"}], scope_of("b-2", "bob"))
    yield manager
    manager.close()


def contents(db: Any) -> set[str]:
    return {r[0] for r in db.connection.execute("SELECT content FROM messages")}


def purge(db: Any, scope: Scope | None, keys: tuple[str, ...]) -> None:
    filters = None if scope is None else message_filter(scope)
    with db._lock:
        purge_mem0_history(db.connection, [], filters, GROUP, keys)


def session(principal: str | None) -> Scope:
    return Scope(level="session", group=GROUP, session=SESSION, principal=principal, agent=None)


def test_an_erased_conversation_takes_only_its_principals_messages(db: Any) -> None:
    purge(db, None, (conversation_key(GROUP, SESSION, "bob"),))
    assert contents(db) == {"alice says hi", "None says hi", "bob elsewhere"}


def test_a_conversation_without_a_principal_takes_only_messages_without_one(db: Any) -> None:
    purge(db, None, (conversation_key(GROUP, SESSION),))
    assert contents(db) == {"alice says hi", "bob says hi", "bob elsewhere"}


def test_a_session_scope_reaches_its_principals_messages_only(db: Any) -> None:
    purge(db, session("bob"), ())
    assert contents(db) == {"alice says hi", "None says hi", "bob elsewhere"}
    purge(db, session(None), ())
    assert contents(db) == {"alice says hi", "bob elsewhere"}


def test_a_user_scope_reaches_every_session_of_the_principal(db: Any) -> None:
    user = Scope(level="user", group=GROUP, session=None, principal="bob", agent=None)
    purge(db, user, ())
    assert contents(db) == {"alice says hi", "None says hi"}


def test_another_groups_conversation_key_reaches_nothing(db: Any) -> None:
    purge(db, None, (conversation_key("other", SESSION, "bob"),))
    assert len(contents(db)) == 4
