"""Where a long-term fact came from, recorded in its Mem0 payload and read back.

Every fact KAOS stores carries flat metadata keys (Chroma takes scalars only) from which
``provenance_of`` rebuilds the contract's ``Provenance``:

- a fact stored as written (an ``infer: false`` turn, or a fact an agent saved on purpose)
  is added on its own, with its turn's source, sequence number and time;
- facts extracted from a batch of turns get, for each speaking role, the sequence numbers
  and the latest time of that role's turns, plus the extraction model; which role a fact
  is taken from is Mem0's per-fact ``attributed_to``, which ``verified_answer`` sets from
  the batch before Mem0 reads the model's answer.

The model's own ``attributed_to`` is a claim, not evidence: a poisoned assistant or tool
text could have the model attribute an instruction to the user. ``verified_answer``
keeps a claimed "user" only when the fact's words are at least as present in the user's
turns as in the assistant's, and otherwise attributes the fact to the less trusted role.
The metadata holds no text of the conversation (sequence numbers, times, a role, a model
name), so it is stored beside the sealed text, not sealed itself.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

from kaos_core.memory.contract import Provenance
from kaos_core.trust import FACT_SOURCES, FactSource

from kaos_memory.storage.base import TurnRow

SOURCE_KEY = "kaos_source"
TURNS_KEY = "kaos_turns"
AT_KEY = "kaos_at"
MODEL_KEY = "kaos_model"
# Mem0's own key for the role its extraction answer attributes a fact to.
ATTRIBUTED_KEY = "attributed_to"
SPEAKERS: tuple[FactSource, ...] = ("user", "assistant")

_WORD_RE = re.compile(r"[^\W_]{3,}")
# Words a fact shares with either side whatever it says ("User", "the", ...).
_COMMON = frozenset(
    (
        "the",
        "and",
        "that",
        "this",
        "with",
        "from",
        "have",
        "has",
        "had",
        "was",
        "were",
        "are",
        "for",
        "not",
        "but",
        "you",
        "your",
        "user",
        "users",
        "assistant",
        "they",
        "their",
        "them",
        "she",
        "her",
        "his",
        "him",
        "its",
        "our",
        "out",
        "about",
        "into",
        "what",
        "when",
        "which",
        "who",
        "will",
        "would",
        "can",
        "could",
        "should",
        "been",
        "being",
        "also",
        "like",
        "just",
        "very",
    )
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD_RE.findall(text.lower()) if w not in _COMMON}


def _seqs(turns: Sequence[TurnRow]) -> str:
    return ",".join(str(t.seq) for t in turns)


def verbatim_metadata(turn: TurnRow) -> dict[str, str]:
    """The provenance of a fact that is ``turn``'s text as written."""
    source = turn.source if turn.source is not None else turn.role
    return {SOURCE_KEY: source, TURNS_KEY: str(turn.seq), AT_KEY: turn.at}


def extracted_metadata(turns: Sequence[TurnRow], model: str) -> dict[str, str]:
    """The provenance every fact extracted from ``turns`` shares; its role comes from
    ``attributed_to``."""
    meta = {MODEL_KEY: model}
    for role in SPEAKERS:
        said = [t for t in turns if t.role == role]
        if said:
            meta[f"{TURNS_KEY}_{role}"] = _seqs(said)
            meta[f"{AT_KEY}_{role}"] = max(t.at for t in said)
    return meta


Add = Callable[[list[dict[str, str]], dict[str, str], bool], list[str]]


def add_all(
    add: Add, turns: Sequence[TurnRow], infer: bool, metadata: dict[str, str], model: str
) -> list[str]:
    """``turns`` through Mem0's ``add`` (``add(messages, metadata, infer)``, the ids it
    stored), each fact with its provenance. A fact an agent saved on purpose is kept as
    written, and so is every turn of a write that asked not to infer: each is added on its
    own, with its own turn. The rest are extracted in one call and attributed."""
    stored: list[str] = []
    said = [t for t in turns if t.source is None and infer]
    for turn in turns:
        if turn.source is not None or not infer:
            message = {"role": turn.role, "content": turn.content}
            stored += add([message], {**metadata, **verbatim_metadata(turn)}, False)
    if said:
        messages = [{"role": t.role, "content": t.content} for t in said]
        with attributing(said):
            stored += add(messages, {**metadata, **extracted_metadata(said, model)}, True)
    return stored


def _parse_seqs(value: object) -> list[int]:
    if not isinstance(value, str) or not value:
        return []
    try:
        return [int(part) for part in value.split(",")]
    except ValueError:
        return []


def _recorded(payload: dict[str, Any]) -> tuple[FactSource, str, str | None] | None:
    """The source ``payload`` records, the suffix of its turns and time keys, and the model
    that extracted it; None for a fact stored without provenance."""
    stored = payload.get(SOURCE_KEY)
    for source in FACT_SOURCES:
        if source == stored:
            return source, "", None
    model = payload.get(MODEL_KEY)
    if not isinstance(model, str):
        return None
    role: FactSource = "user" if payload.get(ATTRIBUTED_KEY) == "user" else "assistant"
    return role, f"_{role}", model


def provenance_of(payload: dict[str, Any]) -> Provenance | None:
    """The provenance recorded in ``payload``; None for a fact stored without it."""
    found = _recorded(payload)
    if found is None:
        return None
    source, suffix, model = found
    at = payload.get(AT_KEY + suffix)
    return Provenance(
        source=source,
        turns=_parse_seqs(payload.get(TURNS_KEY + suffix)),
        observed_at=at if isinstance(at, str) else None,
        recorded_at=str(payload.get("created_at") or ""),
        model=model,
    )


def valid_from(payload: dict[str, Any]) -> str:
    """When the fact became true (world time): its source turns' time, else when it was
    recorded. Read from the payload's keys, not by building its provenance: every hit of
    an ``as_of`` search is judged by it."""
    found = _recorded(payload)
    at = None if found is None else payload.get(AT_KEY + found[1])
    return at if isinstance(at, str) and at else str(payload.get("created_at") or "")


def source_of(payload: dict[str, Any]) -> FactSource:
    """The source an injection policy judges a fact by (read from the payload's keys, not
    by building its provenance: every hit of a search's pool is judged). A fact stored
    before provenance was recorded counts as Mem0 attributed it, or as the user's when
    Mem0 recorded no attribution: KAOS extracted only user and assistant turns then, and
    treating its old facts as less trusted would take them out of every agent's context
    at the upgrade."""
    found = _recorded(payload)
    if found is not None:
        return found[0]
    return "assistant" if payload.get(ATTRIBUTED_KEY) == "assistant" else "user"


# The turns of the extraction in progress, by role (copied into Mem0's threads with the
# rest of the caller's context).
_BATCH: ContextVar[dict[str, set[str]] | None] = ContextVar("kaos_attribution", default=None)


@contextlib.contextmanager
def attributing(turns: Sequence[TurnRow]) -> Iterator[None]:
    """Extraction answers given in this context are attributed against ``turns``."""
    words: dict[str, set[str]] = {}
    for turn in turns:
        if turn.role in SPEAKERS:
            words.setdefault(turn.role, set()).update(_words(turn.content))
    token = _BATCH.set(words)
    try:
        yield
    finally:
        _BATCH.reset(token)


def attribute(text: str, claimed: object, said: dict[str, set[str]]) -> FactSource:
    """The role a fact of ``text`` is taken from, given the roles' words in the batch."""
    if set(said) == {"user"}:
        return "user"
    if "user" not in said:
        return "assistant"
    words = _words(text)
    if not words:
        return "assistant"
    user = len(words & said["user"]) / len(words)
    assistant = len(words & said.get("assistant", set())) / len(words)
    if claimed == "user":
        return "user" if user >= assistant else "assistant"
    if claimed is None or claimed == "":
        return "user" if user > assistant else "assistant"
    return "assistant"


def verified_answer(doc: Any) -> str | None:
    """A usable extraction answer (``{"memory": [...]}``) with each fact's
    ``attributed_to`` set by ``attribute``, as JSON; None outside an attributed
    extraction or when ``doc`` is not that shape."""
    said = _BATCH.get()
    memory = doc.get("memory") if isinstance(doc, dict) else None
    if said is None or not isinstance(memory, list):
        return None
    for item in memory:
        if isinstance(item, dict):
            text = item.get("text")
            item[ATTRIBUTED_KEY] = attribute(
                text if isinstance(text, str) else "", item.get(ATTRIBUTED_KEY), said
            )
    return json.dumps(doc)
