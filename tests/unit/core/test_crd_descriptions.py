"""Every field of the four resources is described in the generated CRDs, so ``kubectl explain``
answers for each of them (the descriptions come from the pydantic models' ``Field``s)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kaos_core.crds.generate import KINDS, render_all


def _properties(node: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    """Every property under ``node`` with its path, through objects, arrays and maps."""
    out: list[tuple[str, dict[str, Any]]] = []
    for name, sub in (node.get("properties") or {}).items():
        out.append((f"{path}.{name}", sub))
        out += _properties(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        out += _properties(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += _properties(node["additionalProperties"], f"{path}{{}}")
    return out


def _schemas() -> dict[str, dict[str, Any]]:
    """Kind -> the openAPIV3Schema of its generated CRD, as ``hack/gen-crds`` writes it."""
    out = {}
    for text in render_all().values():
        doc = yaml.safe_load(text)
        out[doc["spec"]["names"]["kind"]] = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return out


SCHEMAS = _schemas()


def test_every_kind_is_walked() -> None:
    assert (
        set(SCHEMAS)
        == {k.info.kind for k in KINDS}
        == {
            "Agent",
            "ModelAPI",
            "MCPServer",
            "MemoryStore",
        }
    )


# The API server forbids anything but ``type: object`` on the root's metadata (it supplies
# ObjectMeta, which kubectl explain describes from its own schema).
UNDESCRIBED = {"metadata"}


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_every_property_has_a_description(kind: str) -> None:
    properties = _properties(SCHEMAS[kind], kind)
    # Deep: the walk reaches the overrides' nested Kubernetes shapes.
    assert len(properties) > 150
    missing = [
        path
        for path, node in properties
        if not str(node.get("description", "")).strip()
        and path.removeprefix(f"{kind}.") not in UNDESCRIBED
    ]
    assert not missing, "properties without a description:\n" + "\n".join(missing)
    assert SCHEMAS[kind]["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize(
    ("kind", "path", "words"),
    [
        ("Agent", "spec.config.instructions", "system prompt"),
        ("Agent", "spec.config.description", "agent card"),
        ("Agent", "spec.config.reasoningLoopMaxSteps", "Model calls one run may make"),
        ("Agent", "spec.image", "instead of the chart's kaos-agent image"),
        ("Agent", "spec.replicas", "0 stops"),
        ("MemoryStore", "spec.storage.storageClassName", "ClaimPending"),
        ("MemoryStore", "spec.storage.connectionSecret", "PostgreSQL connection string"),
        ("MemoryStore", "spec.defaultFailureMode", "strict"),
    ],
)
def test_the_fields_a_newcomer_asks_about_say_what_they_do(
    kind: str, path: str, words: str
) -> None:
    node = SCHEMAS[kind]
    for part in path.split("."):
        node = node["properties"][part]
    assert words in node["description"]
