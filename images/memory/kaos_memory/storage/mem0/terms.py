"""The service's scope and attribution in Mem0's terms: the vocabulary every layer of the
long-term tier shares, and the only place that knows it.

A fact carries entity ids (``user_id``/``agent_id``/``run_id``, escaped because Mem0
rejects whitespace) and KAOS's metadata (group, session, fold, attempt). Each scope level
is a filter over those keys, and every row a backend returns is checked against the scope
again in Python (``in_scope``).

Filters use Mem0's wildcard convention. ``"*"`` means different things on the two
backends (Chroma drops the condition; pgvector turns it into "key present"), so the
wildcard is only ever put on ``run_id``: every fact carries a ``run_id`` (a write needs a
session), so "key present" and "no condition" select the same rows on both backends,
including facts written without a principal (which have no ``user_id``).
"""

from __future__ import annotations

import re
from typing import Any

from kaos_core.memory.contract import Fact

from kaos_memory.scope import Attribution, Scope
from kaos_memory.storage.mem0.provenance import provenance_of, valid_from

WILDCARD = "*"
USER_KEY = "user_id"
AGENT_KEY = "agent_id"
RUN_ID_KEY = "run_id"
# Mem0's entity ids: the keys a scope's filter names (indexed in external mode).
ID_KEYS = (USER_KEY, AGENT_KEY, RUN_ID_KEY)
TENANT_KEYS = ID_KEYS
GROUP_KEY = "kaos_group"
# A fact's end of validity, retirement and replacement (``temporal``): plain payload keys.
VALID_TO_KEY = "kaos_valid_to"
RETIRED_AT_KEY = "kaos_retired_at"
SUPERSEDED_BY_KEY = "kaos_superseded_by"
# On the replacing fact: the ids it retired, comma-separated (so erasing it reinstates them).
SUPERSEDES_KEY = "kaos_supersedes"
RUN_KEY = "kaos_run"
# Metadata keys naming the fold and the attempt that stored a fact. Strings, because the
# two vector stores compare filter values with different typing rules.
FOLD_KEY = "kaos_fold"
ATTEMPT_KEY = "kaos_attempt"

# A filter over a fact's payload keys (a concrete value, or the wildcard).
Filters = dict[str, str]
# A stored fact's payload as the vector store holds it (its text under ``data``).
Payload = dict[str, Any]
# A fact as listed: its id and payload (None where the store kept none).
Row = tuple[str, Payload | None]
# A vector-store hit: fact id, similarity, payload (None when the store kept none).
Hit = tuple[str, float, Payload | None]
# A position in listing order: ``(created_at, fact id)``.
Position = tuple[str, str]
# A principal as its facts carry it: ``(group, escaped principal)``.
Key = tuple[str, str]

# Mem0 rejects entity ids with whitespace; headers may carry it. A reversible escape keeps
# equality (and so every filter) intact. '%' is escaped first so decoding is unambiguous.
_ESCAPE_RE = re.compile(r"[%\s]")
_UNESCAPE_RE = re.compile(r"%([0-9A-F]{2,6});")


def to_entity_id(value: str) -> str:
    return _ESCAPE_RE.sub(lambda m: f"%{ord(m.group(0)):02X};", value)


def from_entity_id(value: str) -> str:
    return _UNESCAPE_RE.sub(lambda m: chr(int(m.group(1), 16)), value)


def mem0_ids(attribution: Attribution) -> dict[str, str]:
    """The entity ids a write's facts are stored under: every verified key."""
    ids = {RUN_ID_KEY: to_entity_id(attribution.session)}
    if attribution.principal is not None:
        ids[USER_KEY] = to_entity_id(attribution.principal)
    if attribution.agent is not None:
        ids[AGENT_KEY] = to_entity_id(attribution.agent)
    return ids


def mem0_metadata(attribution: Attribution) -> dict[str, str]:
    return {GROUP_KEY: attribution.group, RUN_KEY: attribution.session}


def mem0_principal(attribution: Attribution) -> Key | None:
    """The principal whose facts a write may change (None: written without one)."""
    if attribution.principal is None:
        return None
    return attribution.group, to_entity_id(attribution.principal)


def mem0_filter(scope: Scope) -> Filters:
    """The Mem0 filter of a scope's level (see the module docstring for the wildcard)."""
    f: Filters = {GROUP_KEY: scope.group}
    if scope.level == "session":
        assert scope.session is not None
        f[RUN_ID_KEY] = to_entity_id(scope.session)
        if scope.principal is not None:
            f[USER_KEY] = to_entity_id(scope.principal)
    elif scope.level == "agent":
        assert scope.agent is not None
        f[AGENT_KEY] = to_entity_id(scope.agent)
        if scope.principal is not None:
            f[USER_KEY] = to_entity_id(scope.principal)
    elif scope.level == "user":
        assert scope.principal is not None
        f[USER_KEY] = to_entity_id(scope.principal)
    else:
        f[RUN_ID_KEY] = WILDCARD
    return f


def fold_filter(group: str, session: str, fold_id: int) -> Filters:
    """The facts any attempt at extracting one fold of a session stored."""
    return {
        GROUP_KEY: group,
        RUN_KEY: session,
        RUN_ID_KEY: to_entity_id(session),
        FOLD_KEY: str(fold_id),
    }


def in_scope(scope: Scope, payload: Payload) -> bool:
    """Whether a stored fact's payload falls inside the scope (the filter, in Python).

    Used to re-check rows a backend returned, so a filter translation defect in a vector
    store cannot leak another tenant's fact into an answer.
    """
    for key, value in mem0_filter(scope).items():
        if value == WILDCARD:
            continue
        if payload.get(key) != value:
            return False
    return True


def stored_ids(result: dict[str, Any]) -> list[str]:
    """The ids of the facts a ``Memory.add`` result reports stored."""
    return [str(r["id"]) for r in result.get("results", []) if "id" in r]


def to_fact(fact_id: str, payload: Payload, score: float | None = None) -> Fact:
    """A stored fact as the service's contract gives it out (entity ids unescaped)."""

    def decoded(key: str) -> str | None:
        value = payload.get(key)
        return None if value is None else from_entity_id(str(value))

    return Fact(
        id=fact_id,
        text=str(payload.get("data") or ""),
        score=score,
        agent_id=decoded(AGENT_KEY),
        user_id=decoded(USER_KEY),
        session_id=decoded(RUN_ID_KEY),
        created_at=str(payload.get("created_at") or ""),
        provenance=provenance_of(payload),
        valid_from=valid_from(payload),
        valid_to=_text(payload.get(VALID_TO_KEY)),
        retired_at=_text(payload.get(RETIRED_AT_KEY)),
        superseded_by=_text(payload.get(SUPERSEDED_BY_KEY)),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
