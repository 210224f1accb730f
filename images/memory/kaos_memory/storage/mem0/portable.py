"""Facts as an export reads them and an import writes them (``kaos_memory.portable``).

An exported fact is its payload in the service's terms: entity ids unescaped, KAOS's own
keys as fields, every other payload field (provenance: the fold and attempt that stored
it, metadata a Mem0 writer gave) as metadata. An imported fact is written as Mem0 writes
one (``Memory._create_memory``: text, hash, times, entity ids, metadata), through the
vector store Mem0 holds, embedded by this store's embedder, under an id derived from its
source id and the target group, so importing it again finds it there and writes nothing.
A store's own export imported into it again finds its facts by their own ids. Mem0's
history gets no row: an imported fact's text is not kept twice.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kaos_memory.storage.base import StoredFact
from kaos_memory.storage.mem0.terms import (
    AGENT_KEY,
    GROUP_KEY,
    RUN_ID_KEY,
    RUN_KEY,
    USER_KEY,
    Key,
    Payload,
    from_entity_id,
    to_entity_id,
)

# Payload fields a fact record carries as fields of its own (or not at all: the hash and
# Mem0's lemmatised copy are derived from the text).
_OWN = frozenset(
    {
        "data",
        "hash",
        "text_lemmatized",
        "created_at",
        "updated_at",
        USER_KEY,
        AGENT_KEY,
        RUN_ID_KEY,
        GROUP_KEY,
        RUN_KEY,
    }
)
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://kaos.tools/memory/export")

Scalar = str | int | float | bool | None


def imported_id(group: str, source_id: str) -> str:
    """The id an imported fact is stored under: stable per source fact and target group."""
    return str(uuid.uuid5(_NAMESPACE, f"{group}|{source_id}"))


def _scalar(value: Any) -> Scalar:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def stored_fact(fact_id: str, payload: Payload) -> StoredFact:
    def decoded(key: str) -> str | None:
        value = payload.get(key)
        return None if value is None else from_entity_id(str(value))

    updated = payload.get("updated_at")
    return StoredFact(
        id=fact_id,
        text=str(payload.get("data") or ""),
        group=str(payload.get(GROUP_KEY) or ""),
        session=decoded(RUN_ID_KEY) or str(payload.get(RUN_KEY) or ""),
        principal=decoded(USER_KEY),
        agent=decoded(AGENT_KEY),
        created_at=str(payload.get("created_at") or ""),
        updated_at=None if updated is None else str(updated),
        metadata={k: _scalar(v) for k, v in sorted(payload.items()) if k not in _OWN},
    )


def payload_of(fact: StoredFact) -> Payload:
    payload: Payload = dict(fact.metadata)
    payload.update(
        {
            "data": fact.text,
            "hash": hashlib.md5(fact.text.encode()).hexdigest(),
            "created_at": fact.created_at,
            "updated_at": fact.updated_at or fact.created_at,
            RUN_ID_KEY: to_entity_id(fact.session),
            GROUP_KEY: fact.group,
            RUN_KEY: fact.session,
        }
    )
    if fact.principal is not None:
        payload[USER_KEY] = to_entity_id(fact.principal)
    if fact.agent is not None:
        payload[AGENT_KEY] = to_entity_id(fact.agent)
    return payload


def principal_key(fact: StoredFact) -> Key | None:
    return None if fact.principal is None else (fact.group, to_entity_id(fact.principal))


def _held(store: Any, fact: StoredFact) -> bool:
    """Whether the fact is this store's own (an export of a store imported into it)."""
    try:
        uuid.UUID(fact.id)
    except ValueError:
        return False  # not an id this store gives out
    found = store.get(vector_id=fact.id)
    payload = None if found is None else found.payload
    return payload is not None and payload.get(GROUP_KEY) == fact.group


def import_facts(
    memory: Any,
    write: Callable[[Key | None, Callable[[], list[str]]], list[str]],
    facts: Sequence[StoredFact],
) -> int:
    """Store the facts not stored yet, each principal's through ``write`` (the backend's,
    which keeps its index and cache in step); how many were new. Blocking."""
    store = memory.vector_store
    by_principal: dict[Key | None, list[tuple[str, StoredFact]]] = {}
    seen: set[str] = set()
    for fact in facts:
        fact_id = imported_id(fact.group, fact.id)
        if fact_id in seen or _held(store, fact):
            continue
        seen.add(fact_id)
        if store.get(vector_id=fact_id) is None:
            by_principal.setdefault(principal_key(fact), []).append((fact_id, fact))
    written = 0
    for principal, batch in by_principal.items():

        def add(batch: list[tuple[str, StoredFact]] = batch) -> list[str]:
            vectors = [memory.embedding_model.embed(f.text, "add") for _, f in batch]
            ids = [fact_id for fact_id, _ in batch]
            store.insert(vectors=vectors, ids=ids, payloads=[payload_of(f) for _, f in batch])
            return ids

        written += len(write(principal, add))
    return written
