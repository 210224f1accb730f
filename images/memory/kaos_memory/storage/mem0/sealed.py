"""Mem0 over sealed storage: Mem0 sees plaintext in memory only, its stores hold ciphertext.

Two wrappers go between Mem0 and what it writes to (``install``):

- ``SealedVectorStore`` around Mem0's vector store (Chroma or pgvector): a fact's ``data``
  is sealed under its owner's key (the principal its ``user_id`` names, else its agent)
  to the record ``fact:<id>``; ``text_lemmatized`` (Mem0's keyword-search copy of the
  text) becomes a keyed blind index of its words; the unkeyed ``hash`` of the text is not
  stored (it is recomputed from the opened text, for Mem0's duplicate check). Reads open
  ``data`` again; a fact whose key is gone is left out, as if erased. Vectors stay
  plaintext: search needs them (the README's threat model names what they reveal).
- ``SealedHistory`` around Mem0's history database: the turns Mem0 keeps as the next
  extraction's context (``messages``) are sealed under the session scope's owner to the
  record ``message:<scope>``; its audit trail of fact changes (``history``) keeps the
  events without their text (KAOS never reads it).

Both run on Mem0's worker threads; keys come from the keyring (``key_for_sync``,
``prepare_sync``: one load or check per key for a whole result), cached after first use.
KAOS's own reads of the vector store (its searches, pages) get sealed payloads and open them
on the event loop (``open_payload``), where opened fact texts are kept by fact id in the
keyring's text cache (``FACT_SPACE``) for the next search that finds them.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any

from kaos_memory.crypto import envelope
from kaos_memory.crypto.keyring import Batch, DataKey, Keyring, owner_of
from kaos_memory.storage.mem0.history import parse_session_scope
from kaos_memory.storage.mem0.terms import AGENT_KEY, USER_KEY, Payload, from_entity_id

DATA = "data"
LEMMAS = "text_lemmatized"
HASH = "hash"
_WORD = re.compile(r"\w+")


# The text cache's space of fact texts: ``fact_record(fact_id)`` is this followed by the id.
FACT_SPACE = "fact:"


def fact_record(fact_id: str) -> str:
    return f"{FACT_SPACE}{fact_id}"


def payload_owner(ids: dict[str, Any]) -> str:
    """The owner of a fact or a session scope, from its (escaped) entity ids."""
    user, agent = ids.get(USER_KEY), ids.get(AGENT_KEY)
    return owner_of(
        None if not user else from_entity_id(str(user)),
        None if not agent else from_entity_id(str(agent)),
    )


def blind_words(key: DataKey, text: str) -> str:
    return " ".join(key.blind(w) for w in _WORD.findall(text.lower()))


def seal_payload(ring: Keyring, fact_id: str, payload: Payload | None) -> Payload | None:
    if payload is None or not isinstance(payload.get(DATA), str):
        return payload
    text = payload[DATA]
    if envelope.is_sealed(text):
        return payload
    key = ring.key_for_sync(payload_owner(payload))
    sealed = dict(payload)
    sealed[DATA] = key.seal(text, fact_record(fact_id))
    sealed[LEMMAS] = blind_words(key, text)
    sealed.pop(HASH, None)
    return sealed


def open_payload(
    ring: Keyring, batch: Batch, fact_id: str, payload: Payload | None
) -> Payload | None:
    """The payload with its text opened (None: its key is gone, it reads as erased), with
    the keys ``Keyring.prepare`` gave, on the event loop (``open_payload_sync`` is Mem0's).
    Without Mem0's ``hash``: KAOS's reads never give it out."""
    if payload is None:
        return None
    sealed = payload.get(DATA)
    if not isinstance(sealed, str) or not sealed.startswith(envelope.PREFIX):
        return payload
    hit = ring.opened(FACT_SPACE).get(fact_id)
    if hit is not None and hit[0] == sealed:
        text: str | None = hit[1]
    else:
        text = ring.open(sealed, fact_record(fact_id), batch, keep=False)
        if text is None:
            return None
        ring.remember(FACT_SPACE, fact_id, sealed, text)
    out = dict(payload)
    out[DATA] = text
    out.pop(LEMMAS, None)
    return out


def _opened(payload: Payload, text: str) -> Payload:
    out = dict(payload)
    out[DATA] = text
    out[HASH] = hashlib.md5(text.encode()).hexdigest()  # Mem0's duplicate check only
    out.pop(LEMMAS, None)
    return out


def open_payload_sync(
    ring: Keyring, fact_id: str, payload: Payload | None, batch: Batch | None = None
) -> Payload | None:
    """``open_payload`` on Mem0's worker threads, with Mem0's ``hash`` of the text; the
    keys from ``batch`` (``Keyring.prepare_sync``), else loaded one by one."""
    if payload is None or not isinstance(payload.get(DATA), str):
        return payload
    if not envelope.is_sealed(payload[DATA]):
        return payload
    text = ring.open_sync(payload[DATA], fact_record(fact_id), batch)
    return None if text is None else _opened(payload, text)


def payload_texts(payloads: Iterable[Payload | None]) -> list[str]:
    return [p[DATA] for p in payloads if p is not None and isinstance(p.get(DATA), str)]


class SealedVectorStore:
    """Mem0's vector store, sealing payloads on their way in and opening them on the way out;
    everything else is the wrapped store's."""

    def __init__(self, inner: Any, ring: Keyring) -> None:
        self.inner = inner
        self._ring = ring

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _open(self, results: Any, *, drop: bool = True) -> Any:
        """Results with their text opened; one whose key is gone is left out (``drop``:
        it reads as erased) or kept as stored (a deletion still finds it)."""
        if results and isinstance(results, list) and isinstance(results[0], list):
            return [self._open(r, drop=drop) for r in results]
        batch = self._ring.prepare_sync(payload_texts(r.payload for r in results or []))
        out = []
        for r in results or []:
            payload = open_payload_sync(self._ring, str(r.id), r.payload, batch)
            if payload is None and r.payload is not None:
                if drop:
                    continue
                payload = r.payload
            r.payload = payload
            out.append(r)
        return out

    def insert(self, vectors: Any, payloads: Any = None, ids: Any = None) -> Any:
        if payloads is not None and ids is not None:
            payloads = [
                seal_payload(self._ring, str(i), p) for i, p in zip(ids, payloads, strict=True)
            ]
        return self.inner.insert(vectors=vectors, payloads=payloads, ids=ids)

    def update(self, vector_id: str, vector: Any = None, payload: Any = None) -> Any:
        payload = seal_payload(self._ring, str(vector_id), payload)
        return self.inner.update(vector_id=vector_id, vector=vector, payload=payload)

    def search(self, *args: Any, **kwargs: Any) -> Any:
        return self._open(self.inner.search(*args, **kwargs))

    def keyword_search(self, *args: Any, **kwargs: Any) -> Any:
        # The stored words are blind: a plaintext query matches none of them.
        return []

    def list(self, *args: Any, **kwargs: Any) -> Any:
        return self._open(self.inner.list(*args, **kwargs))

    def get(self, vector_id: str) -> Any:
        found = self.inner.get(vector_id=vector_id)
        if found is None:
            return None
        # Mem0 deletes through ``get``: a fact whose key was shredded is still found.
        opened = self._open([found], drop=False)
        return opened[0] if opened else None


class SealedHistory:
    """Mem0's history database with the message context sealed and no fact text kept."""

    def __init__(self, inner: Any, ring: Keyring) -> None:
        self.inner = inner
        self._ring = ring

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def add_history(
        self, memory_id: str, old_memory: Any, new_memory: Any, event: str, **kwargs: Any
    ) -> None:
        self.inner.add_history(memory_id, None, None, event, **kwargs)

    def batch_add_history(self, records: list[dict[str, Any]]) -> None:
        self.inner.batch_add_history(
            [{**r, "old_memory": None, "new_memory": None} for r in records]
        )

    def save_messages(self, messages: list[dict[str, Any]], session_scope: str) -> None:
        key = self._ring.key_for_sync(payload_owner(parse_session_scope(session_scope)))
        record = f"message:{session_scope}"
        sealed = [
            {**m, "content": key.seal(m["content"], record)}
            if isinstance(m.get("content"), str)
            else m
            for m in messages
        ]
        self.inner.save_messages(sealed, session_scope)

    def get_last_messages(self, session_scope: str, limit: int = 10) -> list[dict[str, Any]]:
        record = f"message:{session_scope}"
        out = []
        for m in self.inner.get_last_messages(session_scope, limit):
            content = m.get("content")
            if isinstance(content, str):
                opened = self._ring.open_sync(content, record)
                if opened is None:
                    continue  # its key is gone: erased
                m = {**m, "content": opened}
            out.append(m)
        return out


def install(memory: Any, ring: Keyring) -> None:
    """Put the sealing wrappers between ``memory`` (Mem0's ``Memory``) and its stores."""
    memory.vector_store = SealedVectorStore(memory.vector_store, ring)
    memory.db = SealedHistory(memory.db, ring)


__all__ = [
    "SealedHistory",
    "SealedVectorStore",
    "install",
    "open_payload",
    "payload_texts",
]
