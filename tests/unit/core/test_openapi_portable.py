"""The OpenAPI document's export and import bodies are the format's own models, and the
document names the format schema those models publish."""

from __future__ import annotations

import json

from kaos_core.openapi import JSON, portable
from kaos_core.openapi.memory import memory_document

from tests.support.procs import REPO_ROOT


def test_the_format_schema_named_is_the_one_published() -> None:
    committed = json.loads((REPO_ROOT / portable.FORMAT_SCHEMA_FILE).read_text())
    assert committed["$id"] == portable.FORMAT_SCHEMA_ID


def test_export_streams_json_lines_and_import_takes_them() -> None:
    paths = memory_document()["paths"]
    export, import_ = paths["/v1/export"]["post"], paths["/v1/import"]["post"]

    assert export["requestBody"]["content"][JSON]["schema"] == {
        "$ref": "#/components/schemas/ExportRequest"
    }
    streamed = export["responses"]["200"]["content"]
    assert list(streamed) == [portable.NDJSON]
    assert portable.FORMAT_SCHEMA_ID in streamed[portable.NDJSON]["schema"]["description"]
    assert list(import_["requestBody"]["content"]) == [portable.NDJSON, "text/plain", JSON]
    assert import_["responses"]["200"]["content"][JSON]["schema"] == {
        "$ref": "#/components/schemas/ImportResponse"
    }
    assert {p["name"] for p in import_["parameters"] if p["in"] == "query"} == {
        "source",
        "principal",
        "agent",
        "session",
        "default_session",
    }
    # Refusals the handlers give, each documented with the error model.
    assert {"400", "403", "409", "413", "415", "500"} <= set(import_["responses"])
    assert "portable_forbidden" in export["responses"]["403"]["description"]
    assert "session_bound" in import_["responses"]["409"]["description"]
