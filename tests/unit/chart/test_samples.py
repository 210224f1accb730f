"""The samples under ``samples/`` match the chart's CRDs: every field they set exists in
the structural schema (the API server would silently prune a misspelt one), and they
parse into the pydantic models the operator reads them through. The end-to-end tests
apply them to a real API server, which also checks the CEL rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kaos_cli.kinds import CRD_NAMES
from kaos_core.crds import Agent, CustomObject, MCPServer, MemoryStore, ModelAPI

from tests.fixtures.helm import CHART_DIR, SAMPLES_DIR

MODELS: dict[str, type[CustomObject]] = {
    "Agent": Agent,
    "ModelAPI": ModelAPI,
    "MCPServer": MCPServer,
    "MemoryStore": MemoryStore,
}


def crd_schemas() -> dict[str, dict[str, Any]]:
    schemas = {}
    for path in sorted((CHART_DIR / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        (version,) = crd["spec"]["versions"]
        schemas[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return schemas


def sample_objects() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc)
        for path in sorted(SAMPLES_DIR.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    ]


def unknown_fields(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, dict) and "properties" in schema:
        found = []
        for key, sub in value.items():
            if key not in schema["properties"]:
                found.append(f"{path}.{key}")
            else:
                found += unknown_fields(sub, schema["properties"][key], f"{path}.{key}")
        return found
    if isinstance(value, list) and "items" in schema:
        return [p for i, v in enumerate(value) for p in unknown_fields(v, schema["items"], path)]
    return []


def test_crds_are_the_four_kaos_kinds() -> None:
    names = {
        yaml.safe_load(p.read_text())["metadata"]["name"] for p in (CHART_DIR / "crds").glob("*")
    }
    assert names == set(CRD_NAMES)


def test_samples_cover_every_kind_the_docs_use() -> None:
    found = [name.split(":", 1)[1] for name, _ in sample_objects()]
    assert {f.split("/")[0] for f in found} >= set(MODELS)
    assert sum(f.startswith("Agent/") for f in found) == 2
    assert sum(f.startswith("MemoryStore/") for f in found) == 2


@pytest.mark.parametrize(
    ("name", "doc"), [pytest.param(n, d, id=n) for n, d in sample_objects() if d["kind"] in MODELS]
)
def test_sample_matches_its_crd(name: str, doc: dict[str, Any]) -> None:
    schema = crd_schemas()[doc["kind"]]

    assert doc["apiVersion"] == "kaos.tools/v1alpha1"
    assert "namespace" not in doc["metadata"], "samples apply to the namespace of -n"
    assert unknown_fields(doc["spec"], schema["properties"]["spec"], "spec") == []
    MODELS[doc["kind"]].model_validate(doc)


def test_external_store_references_the_dev_pgvector_secret() -> None:
    """samples/memorystore-external.yaml uses the Secret the chart's devPgvector makes."""
    store = yaml.safe_load((SAMPLES_DIR / "memorystore-external.yaml").read_text())
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())

    assert values["devPgvector"]["connectionSecret"]["name"] == ""  # the default name:
    assert store["spec"]["storage"]["connectionSecret"] == {
        "name": "kaos-pgvector-connection",
        "key": "dsn",
    }


def test_agents_delegate_and_bind_remote_memory() -> None:
    agents = {
        d["metadata"]["name"]: d
        for d in yaml.safe_load_all(Path(SAMPLES_DIR / "agents.yaml").read_text())
    }
    stores = {
        yaml.safe_load(p.read_text())["metadata"]["name"]
        for p in SAMPLES_DIR.glob("memorystore-*.yaml")
    }

    assert agents["coordinator"]["spec"]["agentNetwork"]["access"] == ["researcher"]
    for agent in agents.values():
        memory = agent["spec"]["config"]["memory"]
        assert memory["type"] == "remote"
        assert memory["memoryStore"] in stores
