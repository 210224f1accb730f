"""The portable memory format: JSON Lines, one header line, then one record per line.

These models are the format's one source of truth: the memory service's exporter writes
their JSON, its importer parses every line with them, the OpenAPI document publishes the
endpoints' bodies from them, and the published JSON Schema
(``docs/memory/kaos-memory-export.schema.json``, ``hack/gen-docs`` and a drift test) is
generated from ``Line``. A change to a record is a change of ``VERSION``.

The records carry text and attribution, never vectors: an importer embeds facts with its
own store's embedder (so a file moves between stores of different embedding models), and
the file holds no embedding an attacker could invert.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, RootModel, TypeAdapter
from pydantic_core import PydanticCustomError

from kaos_core.errors import BadRequest
from kaos_core.wire import validate_subject

FORMAT = "kaos-memory-export"
VERSION = 1
SCHEMA_ID = "https://kaos.tools/schemas/memory/kaos-memory-export.schema.json"

Text = Annotated[str, Field(max_length=1_000_000)]
Name = Annotated[str, Field(min_length=1, max_length=1024)]
Time = Annotated[str, Field(min_length=1, max_length=64, description="ISO 8601 time")]
Scalar = str | int | float | bool | None


def _subject(value: str) -> str:
    """A principal or session a header could name (else no recall or forget reaches it)."""
    try:
        return validate_subject("it", value)
    except BadRequest as exc:
        raise PydanticCustomError("subject", exc.message.removeprefix("it ")) from None


def _printable(value: str) -> str:
    if not value.isprintable():
        raise PydanticCustomError("printable", "contains a character that is not printable")
    return value


# The owner keys of a record: checked as the identity headers are, so an import never
# stores memory that no request could reach (nor a control character PostgreSQL refuses).
Subject = Annotated[Name, AfterValidator(_subject)]
AgentName = Annotated[Name, AfterValidator(_printable)]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Embedding(_Record):
    model: Name = Field(description="the embedding model the source store indexed facts with")
    dims: int = Field(ge=1, description="its dimensions")


class ExportScope(_Record):
    level: Literal["store", "user", "agent"] = Field(
        description="store: everything; user: one principal's; agent: one agent's"
    )
    principal: Subject | None = None
    agent: AgentName | None = None


class Header(_Record):
    """The first line: what the file is and where it came from."""

    kind: Literal["header"] = "header"
    format: Literal["kaos-memory-export"] = "kaos-memory-export"
    version: Literal[1] = 1
    store: Name = Field(description="the source store's group (its collection)")
    scope: ExportScope
    embedding: Embedding
    exported_at: Time


class TurnRecord(_Record):
    """A turn of a session's window (``folded`` false) or one folded out of it (its
    digest versions and facts are records of their own)."""

    kind: Literal["turn"] = "turn"
    session: Subject
    role: Name
    text: Text
    at: Time
    principal: Subject | None = None
    agent: AgentName | None = None
    tokens: int = Field(default=0, ge=0)
    infer: bool = True
    folded: bool = False
    source: Literal["saved", "tool"] | None = Field(
        default=None,
        description="a fact the agent saved on purpose (tool: after reading a tool's output);"
        " absent for a conversation turn",
    )


class DigestRecord(_Record):
    """A version of a session's digest (the medium-term tier) and whose session it is."""

    kind: Literal["digest"] = "digest"
    session: Subject
    version: int = Field(ge=1)
    text: Text
    at: Time
    principal: Subject | None = Field(
        default=None,
        description="whose session it is (a session id is each principal's own);"
        " absent: the session has no principal",
    )


class FactRecord(_Record):
    """A long-term fact with its owners as KAOS attributes them."""

    kind: Literal["fact"] = "fact"
    id: Name = Field(description="the fact's id in the source; an import derives its own")
    text: Annotated[str, Field(min_length=1, max_length=1_000_000)]
    session: Subject
    principal: Subject | None = None
    agent: AgentName | None = None
    created_at: Time
    updated_at: Time | None = None
    metadata: dict[str, Scalar] = Field(
        default_factory=dict,
        description="the other fields it was stored with: provenance (kaos_fold,"
        " kaos_attempt, mem0_id) and a writer's own metadata",
    )


class ExportRequest(ExportScope):
    """``POST /v1/export``: whose memory (``store``: all of it)."""


class ImportResponse(_Record):
    """``POST /v1/import``'s answer: what the import wrote and what it found stored."""

    turns: int = Field(description="turns written")
    digests: int = Field(description="digest versions written")
    facts: int = Field(description="facts written (embedded by this store's embedder)")
    skipped: int = Field(description="records the store already held (an import repeated)")
    reembedded: bool = Field(
        description="the source's embedding model differs from this store's (or is unknown)"
    )


Record = Annotated[TurnRecord | DigestRecord | FactRecord, Field(discriminator="kind")]
AnyLine = Annotated[Header | TurnRecord | DigestRecord | FactRecord, Field(discriminator="kind")]


class Line(RootModel[AnyLine]):
    """One line of a file: the header or a record, told apart by ``kind``."""


LINES: TypeAdapter[Header | TurnRecord | DigestRecord | FactRecord] = TypeAdapter(AnyLine)


def parse_line(text: str | bytes) -> Header | TurnRecord | DigestRecord | FactRecord:
    """One line's record; ``pydantic.ValidationError`` or ``ValueError`` if it is not one."""
    return LINES.validate_json(text)


def dump_line(record: BaseModel) -> bytes:
    return record.model_dump_json(exclude_none=False).encode() + b"\n"


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of one line."""
    schema = Line.model_json_schema()
    # ``kind`` has a default for the writer's convenience, but a line must name it.
    for name in ("Header", "TurnRecord", "DigestRecord", "FactRecord"):
        record = schema["$defs"][name]
        record["required"] = ["kind", *record.get("required", [])]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"{FORMAT} v{VERSION}: one line",
        "description": "A KAOS memory export is JSON Lines: the first line a header, every"
        " other line a turn, digest or fact record.",
        **{k: v for k, v in schema.items() if k not in ("title", "description")},
    }


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
