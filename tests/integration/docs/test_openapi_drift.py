"""The committed API documents are the generated ones, and are valid OpenAPI 3.1."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from kaos_agent.openapi import agent_document
from kaos_core.openapi import dumps
from kaos_core.openapi.memory import memory_document
from schemathesis.core.result import Ok

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs" / "openapi"

DOCUMENTS: dict[str, Callable[[], dict[str, Any]]] = {
    "memory.json": memory_document,
    "agent.json": agent_document,
}


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_committed_document_is_generated(name: str) -> None:
    committed = (DOCS / name).read_text(encoding="utf-8")
    assert committed == dumps(DOCUMENTS[name]()), f"docs/openapi/{name} drifted: run hack/gen-docs"


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_document_is_valid_openapi(name: str) -> None:
    # Schemathesis validates the document against the OpenAPI 3.1 meta-schema on load
    # and resolves every reference while collecting the operations.
    schema = schemathesis.openapi.from_path(DOCS / name)
    results = list(schema.get_all_operations())
    assert all(isinstance(r, Ok) for r in results), [r for r in results if not isinstance(r, Ok)]
    paths = json.loads((DOCS / name).read_text(encoding="utf-8"))["paths"]
    assert len(results) == sum(len(methods) for methods in paths.values())


def test_every_error_answer_is_the_error_model() -> None:
    for name, build in DOCUMENTS.items():
        for path, methods in build()["paths"].items():
            for method, op in methods.items():
                for status, reply in op["responses"].items():
                    if int(status) < 400 or path == "/readyz":
                        continue
                    schema = reply["content"]["application/json"]["schema"]
                    # A2A answers even a refused caller with a JSON-RPC error object.
                    rpc = (name, path) == ("agent.json", "/")
                    model = "JsonRpcResponse" if rpc else "ErrorResponse"
                    assert schema == {"$ref": f"#/components/schemas/{model}"}, (
                        name,
                        method,
                        path,
                        status,
                    )


def test_check_mode_reports_drift(tmp_path: Path) -> None:
    (tmp_path / "memory.json").write_text("{}\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "kaos_core.openapi", "--check", tmp_path],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "hack/gen-docs" in done.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "kaos_core.openapi", "--check", DOCS],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
