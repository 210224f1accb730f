"""Mem0's ``get_all`` output as fact records of the portable format.

Mem0 (the library, or its platform's export) lists memories as
``{"results": [{"id", "memory", "user_id", "agent_id", "run_id", "metadata",
"created_at", "updated_at", ...}]}``. Its ids become KAOS attribution through an explicit
mapping: each of principal, agent and session is a template over a memory's ``user_id``,
``agent_id``, ``run_id`` and ``id`` (``{user_id}`` by default for the principal; an agent
in KAOS is usually ``kaos://agent/<namespace>/{agent_id}``). A template naming a field a
memory lacks leaves that attribute unset; a session is needed (every KAOS fact has one),
so the session falls back to ``default_session``. Mem0's id stays in the metadata
(``mem0_id``); the fact's id in KAOS derives from it, so importing the dump twice stores
each memory once.
"""

from __future__ import annotations

import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kaos_core.errors import BadRequest
from kaos_core.http.body import validation_message
from kaos_core.memory.portable import FactRecord, Scalar
from pydantic import ValidationError

from kaos_memory.portable.importer import InvalidLine

FIELDS = ("user_id", "agent_id", "run_id", "id")
ATTRIBUTES = ("principal", "agent", "session")
# Mem0 result keys that are the record's own fields, not metadata.
_OWN = frozenset({"id", "memory", "hash", "metadata", "created_at", "updated_at", "score"})
_OWN |= frozenset(FIELDS)


@dataclass(frozen=True)
class Mem0Mapping:
    principal: str | None = "{user_id}"
    agent: str | None = "{agent_id}"
    session: str | None = "{run_id}"
    default_session: str = "mem0-import"

    @classmethod
    def parse(cls, items: Mapping[str, str]) -> Mem0Mapping:
        """From ``attribute=template`` pairs (an empty template: never set); 400 for an
        unknown attribute or a template naming anything but Mem0's ids."""
        values: dict[str, Any] = {}
        for name, template in items.items():
            if name not in (*ATTRIBUTES, "default_session"):
                raise BadRequest(
                    f"mapping {name!r}: map one of {', '.join(ATTRIBUTES)} or default_session",
                    code="invalid_mapping",
                )
            _check_template(name, template)
            values[name] = template or (None if name != "default_session" else "")
        mapping = cls(**values)
        if not mapping.default_session:
            raise BadRequest("default_session must not be empty", code="invalid_mapping")
        return mapping

    def attribute(self, template: str | None, memory: Mapping[str, Any]) -> str | None:
        if not template:
            return None
        values = {}
        for _, name, _, _ in string.Formatter().parse(template):
            if name is None:
                continue
            value = memory.get(name)
            if value is None or value == "":
                return None
            values[name] = str(value)
        return template.format(**values)


def _check_template(name: str, template: str) -> None:
    try:
        names = [n for _, n, spec, conv in string.Formatter().parse(template) if n is not None]
    except ValueError as exc:
        raise BadRequest(f"mapping {name!r}: {exc}", code="invalid_mapping") from None
    unknown = [n for n in names if n not in FIELDS]
    if unknown:
        raise BadRequest(
            f"mapping {name!r}: {{{unknown[0]}}} is not one of Mem0's ids"
            f" ({', '.join('{' + f + '}' for f in FIELDS)})",
            code="invalid_mapping",
        )


def _scalar(value: Any) -> Scalar:
    return value if value is None or isinstance(value, str | int | float | bool) else str(value)


def fact_records(doc: Any, mapping: Mem0Mapping) -> Iterator[FactRecord]:
    """Every memory of a ``get_all`` answer as a fact record; ``InvalidLine`` names the
    offending result (its 1-based position) before anything is written."""
    results = doc.get("results") if isinstance(doc, dict) else doc
    if not isinstance(results, list):
        raise BadRequest(
            'a Mem0 dump is get_all\'s answer: {"results": [...]}', code="invalid_mem0_dump"
        )
    for number, memory in enumerate(results, start=1):
        if not isinstance(memory, dict):
            raise InvalidLine(number, "a Mem0 memory is an object", unit="result")
        metadata = memory.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise InvalidLine(number, "metadata must be an object", unit="result")
        extra = {k: _scalar(v) for k, v in memory.items() if k not in _OWN}
        try:
            yield FactRecord(
                id=str(memory.get("id") or ""),
                text=memory.get("memory"),  # type: ignore[arg-type]
                session=mapping.attribute(mapping.session, memory) or mapping.default_session,
                principal=mapping.attribute(mapping.principal, memory),
                agent=mapping.attribute(mapping.agent, memory),
                created_at=memory.get("created_at"),  # type: ignore[arg-type]
                updated_at=memory.get("updated_at"),
                metadata={
                    **{k: _scalar(v) for k, v in metadata.items()},
                    **extra,
                    "mem0_id": _scalar(memory.get("id")),
                },
            )
        except ValidationError as exc:
            raise InvalidLine(number, validation_message(exc), unit="result") from None
