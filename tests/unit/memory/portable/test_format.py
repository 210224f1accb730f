"""The portable format's published JSON Schema is generated from the models that write and
read the lines (one source of truth), and what the schema admits the importer admits."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from kaos_core.http.body import validation_message
from kaos_core.memory.portable import (
    DigestRecord,
    Embedding,
    ExportScope,
    FactRecord,
    Header,
    TurnRecord,
    dump_line,
    json_schema,
    parse_line,
)
from kaos_memory.portable.__main__ import main
from pydantic import ValidationError

ROOT = Path(__file__).resolve().parents[4]
SCHEMA = ROOT / "docs" / "memory" / "kaos-memory-export.schema.json"

LINES = [
    Header(
        store="kaos_memory",
        scope=ExportScope(level="user", principal="alice"),
        embedding=Embedding(model="dev-embedder", dims=64),
        exported_at="2026-12-05T20:00:00.000000+00:00",
    ),
    TurnRecord(
        session="s1",
        role="user",
        text="I like tea",
        at="2026-12-05T19:00:00+00:00",
        principal="alice",
        agent="kaos://agent/team/a",
        tokens=4,
        folded=True,
    ),
    DigestRecord(session="s1", version=2, text="Alice likes tea.", at="2026-12-05T19:01:00+00:00"),
    FactRecord(
        id="f1",
        text="Likes tea",
        session="s1",
        principal="alice",
        created_at="2026-12-05T19:02:00+00:00",
        metadata={"kaos_fold": "3", "n": 1},
    ),
]


def test_the_published_schema_is_the_models() -> None:
    assert json.loads(SCHEMA.read_text()) == json_schema()
    assert main(["--check", str(SCHEMA)]) == 0


def test_the_check_names_a_drifted_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "schema.json"
    stale.write_text("{}\n")
    assert main(["--check", str(stale)]) == 1
    assert "drifted" in capsys.readouterr().err


@pytest.mark.parametrize("record", LINES, ids=lambda r: r.kind)
def test_every_line_written_is_valid_by_the_schema_and_reads_back(record: object) -> None:
    line = dump_line(record)  # type: ignore[arg-type]
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    jsonschema.validate(json.loads(line), json_schema())
    assert parse_line(line) == record


@pytest.mark.parametrize(
    "doc",
    [
        {"kind": "turn", "session": "s", "role": "user", "text": "x"},  # no time
        {"kind": "fact", "id": "f", "text": "", "session": "s", "created_at": "t"},
        {"kind": "digest", "session": "s", "version": 0, "text": "x", "at": "t"},
        {
            "kind": "header",
            "format": "kaos-memory-export",
            "version": 2,
            "store": "s",
            "scope": {"level": "store"},
            "embedding": {"model": "m", "dims": 1},
            "exported_at": "t",
        },
        {"kind": "turn", "session": "s", "role": "user", "text": "x", "at": "t", "vector": [1]},
        {"session": "s", "role": "user", "text": "x", "at": "t"},
    ],
)
def test_the_schema_and_the_importer_refuse_the_same_lines(doc: dict[str, object]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, json_schema())
    with pytest.raises(ValueError):
        parse_line(json.dumps(doc))


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("principal", "al\tice", "principal: contains control characters"),
        ("principal", "*", "principal: is the wildcard"),
        ("session", "s\u200b1", "session: contains a character that is not printable"),
        ("session", "x" * 257, "session: is longer than 256 characters"),
        ("agent", "pl\u200banner", "agent: contains a character that is not printable"),
    ],
)
def test_a_line_no_request_could_reach_is_not_a_record(
    field: str, value: str, problem: str
) -> None:
    """An owner no ``X-Principal``/``X-Session-Id`` header could name would hold memory
    that no recall or forget reaches: the line is refused, as the headers are."""
    line = json.loads(dump_line(LINES[1]))
    line[field] = value

    with pytest.raises(ValidationError) as caught:
        parse_line(json.dumps(line))

    assert problem in validation_message(caught.value)
