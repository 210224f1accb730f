"""The portable memory format: JSON Lines, one header line, then one record per line.

These models are the format's one source of truth: the exporter writes their JSON, the
importer parses every line with them, and the published JSON Schema
(``docs/memory/kaos-memory-export.schema.json``, ``hack/gen`` and a drift test) is
generated from ``Line``. A change to a record is a change of ``VERSION``.

The records carry text and attribution, never vectors: an importer embeds facts with its
own store's embedder (so a file moves between stores of different embedding models), and
the file holds no embedding an attacker could invert.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, TypeAdapter

FORMAT = "kaos-memory-export"
VERSION = 1
SCHEMA_ID = "https://kaos.tools/schemas/memory/kaos-memory-export.schema.json"

Text = Annotated[str, Field(max_length=1_000_000)]
Name = Annotated[str, Field(min_length=1, max_length=1024)]
Time = Annotated[str, Field(min_length=1, max_length=64, description="ISO 8601 time")]
Scalar = str | int | float | bool | None


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Embedding(_Record):
    model: Name = Field(description="the embedding model the source store indexed facts with")
    dims: int = Field(ge=1, description="its dimensions")


class ExportScope(_Record):
    level: Literal["store", "user", "agent"] = Field(
        description="store: everything; user: one principal's; agent: one agent's"
    )
    principal: Name | None = None
    agent: Name | None = None


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
    session: Name
    role: Name
    text: Text
    at: Time
    principal: Name | None = None
    agent: Name | None = None
    tokens: int = Field(default=0, ge=0)
    infer: bool = True
    folded: bool = False


class DigestRecord(_Record):
    """A version of a session's digest (the medium-term tier)."""

    kind: Literal["digest"] = "digest"
    session: Name
    version: int = Field(ge=1)
    text: Text
    at: Time


class FactRecord(_Record):
    """A long-term fact with its owners as KAOS attributes them."""

    kind: Literal["fact"] = "fact"
    id: Name = Field(description="the fact's id in the source; an import derives its own")
    text: Annotated[str, Field(min_length=1, max_length=1_000_000)]
    session: Name
    principal: Name | None = None
    agent: Name | None = None
    created_at: Time
    updated_at: Time | None = None
    metadata: dict[str, Scalar] = Field(
        default_factory=dict,
        description="the other fields it was stored with: provenance (kaos_fold,"
        " kaos_attempt, mem0_id) and a writer's own metadata",
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
