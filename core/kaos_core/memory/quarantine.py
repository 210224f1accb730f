"""The quarantine endpoints' wire models (``/v1/quarantine/*``, administrators only).

A fact whose text reads as an instruction to the agent (an imperative addressed to the
assistant, a tool-use directive, a destination to send data to, "ignore previous
instructions") is quarantined when it is stored: never recalled, not in ``/v1/list``.
An administrator lists a scope's quarantined facts with the screening's reason, and
releases them (recalled from then on) or erases them; each release and erasure is audited
(``quarantine_release``, ``quarantine_erase``). A release or erasure acts on every fact it
names or, when any id names no quarantined fact of the scope, on none (404).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from kaos_core.memory.contract import Fact, Level, _Request, _Response

# A fact id as the store gives them out (a UUID).
FactId = Annotated[
    str,
    Field(
        min_length=36,
        max_length=36,
        pattern=r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$",
    ),
]
MAX_IDS = 100


class QuarantineListRequest(_Request):
    """One page of a scope's quarantined facts (``store``: every fact of the store;
    ``user``: the ``X-Principal``'s)."""

    level: Level = "store"
    limit: int = Field(default=100, ge=1, le=1000)
    cursor: str | None = Field(default=None, max_length=1024)


class QuarantinedFact(_Response):
    fact: Fact
    # Why the screening held it: ``override``, ``tool_directive``, ``credentials``,
    # ``exfiltration`` or ``addressed_to_agent``.
    reason: str


class QuarantineListResponse(_Response):
    facts: list[QuarantinedFact] = Field(default_factory=list)
    next_cursor: str | None = None


class QuarantineChangeRequest(_Request):
    """Release or erase quarantined facts of the scope by id."""

    level: Level = "store"
    ids: list[FactId] = Field(
        min_length=1, max_length=MAX_IDS, json_schema_extra={"uniqueItems": True}
    )

    @field_validator("ids")
    @classmethod
    def _unique(cls, value: list[str]) -> list[str]:
        if len({v.lower() for v in value}) != len(value):
            raise ValueError("ids lists a fact twice")
        return value


class QuarantineChangeResponse(_Response):
    # How many facts were released or erased (every one named).
    facts: int
    # The audit record of the change (``GET /v1/audit``).
    audit: int


__all__ = [
    "MAX_IDS",
    "QuarantineChangeRequest",
    "QuarantineChangeResponse",
    "QuarantineListRequest",
    "QuarantineListResponse",
    "QuarantinedFact",
]
