"""Facts held back from recall because their text reads as an instruction to the agent.

Every fact Mem0 stores (an extraction's, a verbatim write's, an import's) passes through
``QuarantineVectorStore`` on its way into the vector store, outermost, so it sees the
plaintext before ``sealed`` seals it: a payload without a verdict is screened
(``storage.screening``) and, when its text reads as an instruction, gets the reason under
``QUARANTINE_KEY``. The store leaves held facts out of every recall and of the normal
listing (``held``); an administrator lists them (``quarantined_page``), releases them (the
key kept, empty: never screened again, also after an export and import) or erases them.

A fact that reads as a fact carries no key: screening it again (an import) costs one
screening and finds the same. Changes go through the backend's ``write`` (its listing index
and per-principal vector cache stay in step) on the payload as stored (sealed or not), so
no text is opened to release a fact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kaos_memory.scope import Scope
from kaos_memory.storage.mem0.backend import VectorBackend
from kaos_memory.storage.mem0.terms import Filters, Key, Payload, Position, Row, in_scope
from kaos_memory.storage.quarantine import UnknownFacts
from kaos_memory.storage.screening import screen

# Present with a reason: the fact is quarantined. Present and empty: an admin released it,
# so it is never screened again.
QUARANTINE_KEY = "kaos_quarantine"
# Rows read per step of a quarantine listing (held facts are few among a scope's facts).
SCAN = 1000


def held(payload: dict[str, Any]) -> bool:
    """Whether ``payload`` is a quarantined fact."""
    return bool(payload.get(QUARANTINE_KEY))


def reason_of(payload: Payload) -> str:
    return str(payload.get(QUARANTINE_KEY) or "")


def screened(payload: Payload | None) -> Payload | None:
    """``payload`` with its screening verdict: unchanged when it has one (held or released)
    or reads as a fact."""
    if payload is None or QUARANTINE_KEY in payload:
        return payload
    text = payload.get("data")
    reason = screen(text) if isinstance(text, str) else None
    return payload if reason is None else {**payload, QUARANTINE_KEY: reason}


class QuarantineVectorStore:
    """Mem0's vector store, screening the facts inserted into it; everything else is the
    wrapped store's. (Not named ``inner``: a backend reaching past the sealing wrapper
    through ``inner`` still reaches the stored payloads.)"""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    def insert(self, vectors: Any, payloads: Any = None, ids: Any = None) -> Any:
        if payloads is not None:
            payloads = [screened(p) for p in payloads]
        return self.wrapped.insert(vectors=vectors, payloads=payloads, ids=ids)


def install(memory: Any) -> None:
    """Screen every fact ``memory`` (Mem0's ``Memory``) stores; after ``sealed.install``."""
    memory.vector_store = QuarantineVectorStore(memory.vector_store)


def _stored(memory: Any) -> Any:
    """Mem0's vector store as the backend holds it, past the screening and sealing."""
    store = memory.vector_store
    store = getattr(store, "wrapped", store)
    return getattr(store, "inner", store)


def _position(row: Row) -> Position:
    fact_id, payload = row
    return str((payload or {}).get("created_at") or ""), fact_id


def quarantined_page(
    backend: VectorBackend, filters: Filters, scope: Scope, limit: int, after: Position | None
) -> tuple[list[Row], Position | None]:
    """Up to ``limit`` held facts of ``scope`` in listing order after ``after``, and the
    position to continue from (None: no more); blocking. Reads the scope's facts ``SCAN``
    at a time until a page is full."""
    found: list[Row] = []
    while len(found) <= limit:
        rows = backend.page(filters, SCAN, after)
        found += [(i, p) for i, p in rows if p and in_scope(scope, p) and held(p)]
        if len(rows) < SCAN:
            break
        step = _position(rows[-1])
        if after is not None and step <= after:
            break  # no progress (a row without its time): stop rather than loop
        after = step
    page = found[:limit]
    more = len(found) > limit and page
    return page, _position(page[-1]) if more else None


def held_rows(memory: Any, scope: Scope, ids: Sequence[str]) -> list[Row]:
    """The held facts of ``scope`` that ``ids`` name, as stored; ``UnknownFacts`` (and
    nothing read further) when any id names none. Blocking."""
    store = _stored(memory)
    rows: list[Row] = []
    missing = 0
    for fact_id in dict.fromkeys(ids):
        found = store.get(vector_id=fact_id)
        payload = None if found is None else found.payload
        if payload is None or not in_scope(scope, payload) or not held(payload):
            missing += 1
            continue
        rows.append((fact_id, payload))
    if missing:
        raise UnknownFacts(missing)
    return rows


def release(
    memory: Any,
    write: Callable[[Key | None, Callable[[], list[str]]], list[str]],
    rows: Sequence[Row],
) -> int:
    """Release held facts (their key kept, empty); how many. Blocking."""
    store = _stored(memory)

    def update() -> list[str]:
        for fact_id, payload in rows:
            store.update(vector_id=fact_id, payload={**(payload or {}), QUARANTINE_KEY: ""})
        return [fact_id for fact_id, _ in rows]

    # Whose facts they are may differ per row: every cached principal is refreshed.
    return len(write(None, update))


__all__ = [
    "QUARANTINE_KEY",
    "QuarantineVectorStore",
    "held",
    "held_rows",
    "install",
    "quarantined_page",
    "reason_of",
    "release",
    "screened",
]
