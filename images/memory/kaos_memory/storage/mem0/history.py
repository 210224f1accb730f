"""Mem0's history database: switched off in external mode, purged after every erasure.

Mem0 records every add, update and delete (with the fact text) and the raw turns it
extracted from in a SQLite file beside the process. Mem0 keeps a deleted fact's text in
the ``history`` rows (one per add and per delete, with the old text), and the raw turns
in the ``messages`` rows (per session scope: ``Memory.add`` reads the last ten of the
session scope into every extraction prompt as "last messages" and saves the new turns
after the model answered). An erasure has to reach both (``purge_mem0_history``).

In external mode that file would be node-local state on an ephemeral disk: each replica
would hold a different part of it, extraction context would differ by which replica
served a fold, and an erasure on one replica could not reach another's copy. It is not
memory data (the vector store and the relational tiers are), so external mode keeps none
of it (``null_history``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from kaos_memory.scope import Scope, conversation_key
from kaos_memory.storage.mem0.terms import (
    ID_KEYS,
    RUN_ID_KEY,
    USER_KEY,
    WILDCARD,
    from_entity_id,
    mem0_filter,
)

# Identity keys a message's session scope must hold (a value) or must not hold (None).
MessageFilter = Mapping[str, str | None]

_CHUNK = 500


def null_history() -> Any:
    """A Mem0 ``SQLiteManager`` (in memory) that records nothing and remembers nothing."""
    # Not at the top: Mem0 reads its environment (telemetry, ``MEM0_DIR``) when first
    # imported, which the long-term store sets at its start.
    from mem0.memory.storage import SQLiteManager

    class NullHistory(SQLiteManager):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(":memory:")

        def add_history(self, *args: Any, **kwargs: Any) -> None:
            return None

        def batch_add_history(self, records: list[dict[str, Any]]) -> None:
            return None

        def save_messages(self, messages: list[dict[str, Any]], session_scope: str) -> None:
            return None

        def get_last_messages(self, session_scope: str, limit: int = 10) -> list[dict[str, Any]]:
            return []

    return NullHistory()


def parse_session_scope(scope: str) -> dict[str, str]:
    """Mem0's ``messages.session_scope`` (``agent_id=..&run_id=..&user_id=..``) as a dict."""
    out: dict[str, str] = {}
    for part in scope.split("&"):
        key, sep, value = part.partition("=")
        if sep:
            out[key] = value.replace("%3D", "=").replace("%26", "&").replace("%25", "%")
    return out


def message_filter(scope: Scope) -> MessageFilter:
    """The messages an erasure of ``scope`` reaches, as the facts' filter names them; a
    session is its principal's, so a session without one reaches no message that has one."""
    wanted: dict[str, str | None] = {
        k: v for k, v in mem0_filter(scope).items() if k in ID_KEYS and v != WILDCARD
    }
    if scope.level == "session":
        wanted.setdefault(USER_KEY, None)
    return wanted


def message_conversation(group: str, session_scope: dict[str, str]) -> str | None:
    """The conversation key (``scope.conversation_key``) a message's session scope belongs
    to: its session and principal (``run_id``, ``user_id``); None without a session."""
    run = session_scope.get(RUN_ID_KEY)
    if run is None:
        return None
    user = session_scope.get(USER_KEY)
    principal = None if user is None else from_entity_id(user)
    return conversation_key(group, from_entity_id(run), principal)


def purge_mem0_history(
    conn: Any,
    ids: list[str],
    scope: MessageFilter | None,
    group: str = "",
    keys: Collection[str] = (),
) -> None:
    """Delete the history rows of ``ids`` and the messages of the erased conversations:
    those ``scope`` selects (given), and those of ``group`` whose conversation key is in
    ``keys``.

    ``conn`` is Mem0's own history connection (the caller holds Mem0's lock). ``scope``
    maps identity keys to the value a message's session scope must hold (``None``: must
    not hold the key). Matching by conversation key keeps another principal's messages
    under the same session id: a session id is its principal's, so theirs is another
    conversation.
    """
    wanted = set(keys)
    try:
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ",".join("?" for _ in chunk)
            conn.execute(f"DELETE FROM history WHERE memory_id IN ({marks})", chunk)
        if scope is not None or wanted:
            doomed = []
            for rid, session_scope in conn.execute("SELECT id, session_scope FROM messages"):
                parsed = parse_session_scope(session_scope or "")
                in_scope = scope is not None and all(parsed.get(k) == v for k, v in scope.items())
                if in_scope or message_conversation(group, parsed) in wanted:
                    doomed.append((rid,))
            conn.executemany("DELETE FROM messages WHERE id = ?", doomed)
    except BaseException:
        conn.rollback()
        raise
    conn.commit()
