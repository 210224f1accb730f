"""The CRD manifests: generated from the models, structural, with the binding rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kaos_core.crds import Agent, MemoryStore
from kaos_core.crds.generate import KINDS, REGENERATE, crd_document, drift, render_all

REPO = Path(__file__).resolve().parents[3]
CRD_DIR = REPO / "charts" / "kaos" / "crds"


def test_committed_crds_match_the_models() -> None:
    problems = drift(CRD_DIR)
    assert not problems, (
        "CRD YAML drifted from the models; regenerate with "
        + REGENERATE
        + ("\n" + "\n".join(problems))
    )


def test_generation_is_deterministic() -> None:
    assert render_all() == render_all()


def _walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = [(path, node)]
    for name, sub in node.get("properties", {}).items():
        out += _walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        out += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += _walk(node["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.info.kind)
def test_schema_is_structural(kind: type[Any]) -> None:
    doc = crd_document(kind.info)
    version = doc["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    root = version["schema"]["openAPIV3Schema"]
    for path, node in _walk(root):
        if node.get("x-kubernetes-int-or-string"):
            # A quantity: the one typeless node a structural schema allows.
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            assert set(node) <= {"anyOf", "pattern", "x-kubernetes-int-or-string", "description"}
            continue
        assert "type" in node, f"{path} has no type"
        for banned in ("$ref", "anyOf", "allOf", "oneOf", "title", "$defs"):
            assert banned not in node, f"{path} has {banned}"
        assert not ("properties" in node and "additionalProperties" in node), path
        if node["type"] == "string":
            assert "maxLength" in node or "enum" in node or not path.startswith(".spec."), (
                f"{path}: unbounded string makes CEL cost estimates explode"
            )


def _rules(kind: type[Any]) -> dict[str, str]:
    root = crd_document(kind.info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return {
        rule["message"]: rule["rule"]
        for _, node in _walk(root)
        for rule in node.get("x-kubernetes-validations", [])
    }


def test_binding_rules_are_in_the_schema() -> None:
    agent_rules = _rules(Agent)
    assert "memory type remote requires memoryStore; type local forbids it" in agent_rules
    assert "a maxReadScope other than session requires a memoryStore" in agent_rules
    assert "memory tools require a memoryStore" in agent_rules
    assert any(m.startswith("writeAfterAnswer needs a memoryStore") for m in agent_rules)
    store_rules = _rules(MemoryStore)
    assert "a local MemoryStore has exactly one replica" in store_rules
    assert "external storage requires connectionSecret" in store_rules
    assert (
        "foldTargetTokens must be below the fold trigger (foldTriggerTokens, else tokenBudget)"
        in (store_rules)
    )


def test_printer_columns_and_names() -> None:
    for kind in KINDS:
        doc = yaml.safe_load(render_all()[f"kaos.tools_{kind.info.plural}.yaml"])
        version = doc["spec"]["versions"][0]
        names = [c["name"] for c in version["additionalPrinterColumns"]]
        assert "Phase" in names and "Age" in names
        assert doc["metadata"]["name"] == f"{kind.info.plural}.kaos.tools"
        assert doc["spec"]["names"]["categories"] == ["kaos"]


def test_defaults_reach_nested_fields() -> None:
    root = crd_document(Agent.info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = root["properties"]["spec"]
    # A parent default is what lets the API server default config.memory.type on an
    # Agent without a config block; it is complete because defaults are not defaulted.
    assert spec["properties"]["config"]["default"]["memory"]["type"] == "local"
    memory = spec["properties"]["config"]["properties"]["memory"]
    assert memory["default"] == {
        "enabled": True,
        "type": "local",
        "tools": "none",
        "failureMode": "soft",
        "writeAfterAnswer": False,
    }
    assert memory["properties"]["type"]["default"] == "local"
    assert memory["properties"]["type"]["enum"] == ["local", "remote"]
    assert spec["properties"]["waitForDependencies"]["default"] is True


def test_models_read_and_write_camel_case() -> None:
    agent = Agent.model_validate(
        {
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {
                "modelAPI": "m",
                "mcpServers": ["t"],
                "config": {"memory": {"type": "remote", "memoryStore": "s"}},
            },
        }
    )
    assert agent.spec.model_api == "m"
    assert agent.spec.config.memory.memory_store == "s"
    wire = agent.spec.to_wire()
    assert wire["modelAPI"] == "m"
    assert wire["config"]["memory"]["memoryStore"] == "s"
    assert wire["waitForDependencies"] is True
