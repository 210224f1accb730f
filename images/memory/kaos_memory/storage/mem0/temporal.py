"""Bi-temporal facts: when a fact was true (world time) and when the store held it as
current (system time), and the step that retires a fact a newer one replaces.

When a fact became true (``valid_from``) is not stored: it is the time of the turns it
was taken from (its provenance's ``observed_at``), else when it was recorded
(``provenance.valid_from``). The rest are flat payload keys (Chroma takes scalars only),
ISO 8601 times or ids, empty or absent while the fact is current:

- ``kaos_valid_to``: when it stopped being true, the ``valid_from`` of the fact that
  replaced it.
- ``created_at`` (Mem0's own) is when the store recorded it; ``kaos_retired_at`` when the
  store retired it; ``kaos_superseded_by`` the id of the fact that replaced it, and on that
  fact ``kaos_supersedes`` the ids it retired (erasing it reinstates them).

Mem0 2.2.1 only ever adds facts, so "I live in Lisbon" and, weeks later, "we moved to
Porto" would both come back. After an extraction stores its facts, ``supersede`` shows the
summarisation model each new fact beside the owner's nearest current facts, in one call
per batch, and retires what the model names: its ``valid_to`` set, nothing deleted.
Which of a pair is retired is world time's call, not the model's: the fact that became
true later stands (``in_world_order``). The model's answer is checked against the labels
it was shown: an answer that is not the
JSON asked for, or that names a fact it was not shown, retires nothing (after the model's
retries), so a confused or hostile answer cannot retire an arbitrary fact.

Reads see current facts by default; ``as_of`` a world time gives the facts true then, and
``history`` every version. Erasure selects by owner and so removes every version.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kaos_memory.scope import Attribution, Scope
from kaos_memory.storage.base import View
from kaos_memory.storage.mem0.backend import VectorBackend
from kaos_memory.storage.mem0.llm import Judged, note_supersession
from kaos_memory.storage.mem0.provenance import valid_from
from kaos_memory.storage.mem0.quarantine import held
from kaos_memory.storage.mem0.terms import (
    RETIRED_AT_KEY,
    SUPERSEDED_BY_KEY,
    SUPERSEDES_KEY,
    VALID_TO_KEY,
    WILDCARD,
    Filters,
    Payload,
    Row,
    mem0_filter,
)

log = logging.getLogger(__name__)


# How many of the owner's nearest current facts each new fact is shown beside: what a
# fact can replace is about the same thing, so it is among its nearest.
NEAREST = 5
# The most new facts shown in one call.
MAX_NEW = 16
# The model's prompt: recognised by the development model by its first line.
SYSTEM_PROMPT = """You retire KAOS facts that newer facts replace.
Each new fact below is listed with the user's existing facts nearest to it. An existing
fact is retired when a new fact updates or contradicts it: the same attribute of the same
subject now has a different value (a new city, a new employer, a renamed pet, a changed
preference). A new fact that only adds detail, or is about something else, retires nothing.
Answer with one JSON object and nothing else:
{"retire": [{"existing": "<label of an existing fact>", "by": "<label of a new fact>"}]}
Use only the labels given. Answer {"retire": []} when nothing is replaced."""


def _time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def is_current(payload: Payload) -> bool:
    return not payload.get(VALID_TO_KEY)


def visible(payload: Payload, view: View) -> bool:
    """Whether a read of ``view`` returns this fact (quarantined facts never)."""
    if held(payload):
        return False
    if view.history:
        return True
    if view.as_of is None:
        return is_current(payload)
    start = _time(valid_from(payload))
    end = _time(payload.get(VALID_TO_KEY))
    if start is not None and start > view.as_of:
        return False
    return end is None or end > view.as_of


@dataclass(frozen=True)
class Candidate:
    fact_id: str
    payload: Payload

    @property
    def text(self) -> str:
        return str(self.payload.get("data") or "")


@dataclass(frozen=True)
class Batch:
    """New facts, each with the existing facts shown beside it, labelled for the model."""

    new: list[Candidate]
    nearest: list[list[Candidate]]

    def existing(self) -> dict[str, Candidate]:
        labelled: dict[str, Candidate] = {}
        seen: dict[str, str] = {}
        for group in self.nearest:
            for fact in group:
                if fact.fact_id not in seen:
                    seen[fact.fact_id] = f"E{len(seen) + 1}"
                    labelled[seen[fact.fact_id]] = fact
        return labelled

    def prompt(self) -> str:
        labels = {c.fact_id: label for label, c in self.existing().items()}
        lines = ["## New facts"]
        for i, (fact, group) in enumerate(zip(self.new, self.nearest, strict=True), 1):
            lines.append(f"N{i}: {_one_line(fact.text)}")
            for near in group:
                lines.append(f"  near {labels[near.fact_id]}: {_one_line(near.text)}")
        return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def decisions(answer: object, batch: Batch) -> list[tuple[Candidate, Candidate]] | None:
    """The (retired, replacement) pairs an answer names; None when it is not the JSON asked
    for or names a label it was not shown beside that new fact."""
    doc = _json(answer)
    retire = doc.get("retire") if isinstance(doc, dict) else None
    if not isinstance(retire, list):
        return None
    existing = batch.existing()
    pairs: list[tuple[Candidate, Candidate]] = []
    for item in retire:
        if not isinstance(item, dict):
            return None
        old, by = item.get("existing"), item.get("by")
        if not isinstance(old, str) or not isinstance(by, str) or old not in existing:
            return None
        if not by.startswith("N") or not by[1:].isdigit():
            return None
        index = int(by[1:]) - 1
        if not 0 <= index < len(batch.new):
            return None
        if existing[old] not in batch.nearest[index]:
            return None
        pairs.append((existing[old], batch.new[index]))
    return pairs


def _json(answer: object) -> object:
    if not isinstance(answer, str):
        return None
    try:
        return json.loads(answer)
    except (ValueError, RecursionError):
        return None


def judged(answer: object, pairs: list[tuple[Candidate, Candidate]] | None) -> Judged:
    """The verdict on a supersession answer, in the extraction answers' terms."""
    if pairs is not None:
        return Judged("facts" if pairs else "no_facts")
    if not isinstance(answer, str) or not answer.strip():
        return Judged("unusable", "empty")
    return Judged("unusable", "not_json" if _json(answer) is None else "not_retire_json")


def retired(old: Payload, by: Candidate, now: str) -> Payload:
    """``old`` as retired by ``by`` at system time ``now``."""
    payload = dict(old)
    payload[VALID_TO_KEY] = valid_from(by.payload) or now
    payload[RETIRED_AT_KEY] = now
    payload[SUPERSEDED_BY_KEY] = by.fact_id
    return payload


# The model call: messages in, the answer's text out (None: no answer).
Decide = Callable[[list[dict[str, str]]], str | None]


def supersede(
    store: Any,
    embed: Callable[[list[str]], list[list[float]]],
    filters: Filters,
    new_ids: Sequence[str],
    decide: Decide,
    attempts: int,
) -> int:
    """Retire the owner's current facts that the new facts replace (blocking, on Mem0's
    threads, inside the backend's write bracket); how many were retired. ``store`` is Mem0's
    vector store (opened text), ``filters`` the owner's facts."""
    new = [Candidate(i, p) for i, p in ((i, _payload(store, i)) for i in new_ids) if p]
    new = [c for c in new if c.text and not held(c.payload)]
    if not new:
        return 0
    fresh = {c.fact_id for c in new}
    vectors = embed([c.text for c in new])
    nearest: list[list[Candidate]] = []
    for fact, vector in zip(new, vectors, strict=True):
        hits = store.search(query=fact.text, vectors=vector, top_k=NEAREST * 2, filters=filters)
        found = [
            Candidate(str(h.id), h.payload)
            for h in hits or []
            if h.payload
            and str(h.id) not in fresh
            and _owned(h.payload, filters)
            and h.payload.get("data")
            and is_current(h.payload)
            and not held(h.payload)
        ]
        nearest.append(found[:NEAREST])
    retired_count = 0
    # One call per batch; a very large batch in slices, so the prompt stays well inside a
    # small model's context.
    for first in range(0, len(new), MAX_NEW):
        batch = Batch(new[first : first + MAX_NEW], nearest[first : first + MAX_NEW])
        if any(batch.nearest):
            retired_count += _decide_and_retire(store, batch, decide, attempts)
    return retired_count


def _decide_and_retire(store: Any, batch: Batch, decide: Decide, attempts: int) -> int:
    messages = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": batch.prompt()},
    ]
    pairs = None
    for _ in range(attempts):
        answer = decide(messages)
        pairs = decisions(answer, batch)
        if pairs is not None:
            break
        note_supersession(judged(answer, pairs))
    if pairs is None:
        log.warning("the supersession answers were unusable; nothing retired")
        return 0
    now = datetime.now(UTC).isoformat()
    done: set[str] = set()
    replacing: dict[str, tuple[Candidate, list[str]]] = {}
    for pair in pairs:
        old, by = in_world_order(*pair)
        if old.fact_id in done:
            continue
        done.add(old.fact_id)
        store.update(vector_id=old.fact_id, payload=retired(old.payload, by, now))
        replacing.setdefault(by.fact_id, (by, []))[1].append(old.fact_id)
    for by, ids in replacing.values():
        if by.fact_id not in done:
            earlier = str(by.payload.get(SUPERSEDES_KEY) or "")
            joined = ",".join([*filter(None, earlier.split(",")), *ids])
            store.update(vector_id=by.fact_id, payload={**by.payload, SUPERSEDES_KEY: joined})
    note_supersession(judged("", pairs), len(done))
    return len(done)


def delete(store: Any, backend: VectorBackend, rows: Sequence[Row]) -> int:
    """Delete facts through ``backend`` and make current again what they had retired
    (blocking); how many were deleted."""
    replaced = replaced_by(store, rows)
    count = backend.delete(rows)
    if replaced:
        deleted = {fact_id for fact_id, _ in rows}
        backend.write(None, lambda: reinstate(store, replaced, deleted))
    return count


def replaced_by(store: Any, rows: Sequence[Row]) -> dict[str, str]:
    """The facts that ``rows`` (about to be deleted) retired, by id, each with the id of the
    row that retired it: read before the deletion (a row without its payload is read)."""
    found: dict[str, str] = {}
    for fact_id, payload in rows:
        if payload is None:
            payload = _payload(store, fact_id)
        ids = (payload or {}).get(SUPERSEDES_KEY)
        if isinstance(ids, str) and ids:
            for old in ids.split(","):
                found[old] = fact_id
    return found


def reinstate(store: Any, replaced: dict[str, str], deleted: set[str]) -> list[str]:
    """Make current again the facts whose replacement was erased (the statement of the
    change is gone, so the earlier value holds again); blocking, inside the backend's write
    bracket. A fact retired since by another fact, or erased itself, stays as it is."""
    back: list[str] = []
    for old, by in replaced.items():
        if old in deleted:
            continue
        payload = _payload(store, old)
        if payload is None or payload.get(SUPERSEDED_BY_KEY) != by:
            continue
        # Emptied rather than removed: a vector store may merge an update's keys.
        cleared = {**payload, VALID_TO_KEY: "", RETIRED_AT_KEY: "", SUPERSEDED_BY_KEY: ""}
        store.update(vector_id=old, payload=cleared)
        back.append(old)
    if back:
        log.info("facts reinstated after their replacement was erased", extra={"facts": len(back)})
    return back


def in_world_order(old: Candidate, by: Candidate) -> tuple[Candidate, Candidate]:
    """The pair with the fact that became true later as the replacement: extractions of a
    user's sessions may finish out of order, and an older statement extracted late must
    not retire the newer one (it is retired by it instead)."""
    first, then = _time(valid_from(old.payload)), _time(valid_from(by.payload))
    if first is not None and then is not None and first > then:
        return by, old
    return old, by


def _owned(payload: Payload, filters: Filters) -> bool:
    """The owner's filter checked again in Python: a filter the vector store got wrong must
    not let one tenant's fact retire another's."""
    return all(payload.get(key) == value for key, value in filters.items() if value != WILDCARD)


def _payload(store: Any, fact_id: str) -> Payload | None:
    found = store.get(vector_id=fact_id)
    payload = None if found is None else found.payload
    return payload if isinstance(payload, dict) else None


def supersede_for(memory: Any, attribution: Attribution, stored: list[str], attempts: int) -> int:
    """``supersede`` for the facts a write of ``attribution`` just stored in Mem0's
    ``memory``. The owner is the writer as recall sees it: the agent's facts about the
    principal, else the principal's."""
    if attribution.agent is None and attribution.principal is None:
        return 0
    owner = Scope(
        level="agent" if attribution.agent is not None else "user",
        group=attribution.group,
        session=None,
        principal=attribution.principal,
        agent=attribution.agent,
    )
    return supersede(
        memory.vector_store,
        lambda texts: memory.embedding_model.embed_batch(texts, "search"),
        mem0_filter(owner),
        stored,
        memory.llm.decide,
        attempts,
    )
