"""Turn a pydantic JSON schema into a Kubernetes structural OpenAPI v3 schema.

Structural schemas (apiextensions.k8s.io/v1) want every ``$ref`` resolved inline, a
``type`` on every node, no ``anyOf`` with ``null`` for optional fields (an absent field
is how Kubernetes spells "unset"), no ``additionalProperties`` beside ``properties`` and
no ``title``. Everything else pydantic emits (defaults, enums, bounds, patterns) and the
``x-kubernetes-*`` extensions we attach through ``json_schema_extra`` pass through.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

# Keys that carry no meaning for the API server (or are not allowed there).
_DROPPED = frozenset({"title", "$defs"})
# An int-or-string (a resource quantity) keeps its anyOf of integer and string and has no
# type: the one union a structural schema allows.
INT_OR_STRING = "x-kubernetes-int-or-string"


class SchemaError(ValueError):
    """The model uses a construct that has no structural equivalent."""


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural schema of ``model``, as its wire (alias) names."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs: dict[str, Any] = raw.get("$defs", {})
    return _convert(raw, defs, path=model.__name__)


def _resolve(node: dict[str, Any], defs: dict[str, Any], path: str) -> dict[str, Any]:
    """Inline ``$ref``/single ``allOf`` and collapse ``anyOf [T, null]`` into ``T``.

    Keys beside the reference (a field's description or default) win over the target's.
    """
    node = dict(node)
    if "$ref" in node:
        target = defs[node.pop("$ref").rsplit("/", 1)[-1]]
        node = {**_resolve(target, defs, path), **node}
    if "allOf" in node:
        parts = node.pop("allOf")
        if len(parts) != 1:
            raise SchemaError(f"{path}: allOf with {len(parts)} parts")
        node = {**_resolve(parts[0], defs, path), **node}
    if "anyOf" in node and not node.get(INT_OR_STRING):
        branches = [b for b in node.pop("anyOf") if b.get("type") != "null"]
        if len(branches) != 1:
            raise SchemaError(f"{path}: union of {len(branches)} types has no structural form")
        node = {**_resolve(branches[0], defs, path), **node}
    if node.get("default", 0) is None:
        del node["default"]
    return node


def _convert(node: dict[str, Any], defs: dict[str, Any], path: str) -> dict[str, Any]:
    node = _resolve(node, defs, path)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "const":
            out["enum"] = [value]
        elif key == "properties":
            out["properties"] = {
                name: _convert(sub, defs, f"{path}.{name}") for name, sub in value.items()
            }
        elif key == "items":
            out["items"] = _convert(value, defs, f"{path}[]")
        elif key == "additionalProperties":
            # ``false`` (extra="forbid") and ``true`` (dict[str, Any]) are not structural:
            # pruning drops unknown fields, and free-form maps say so with
            # x-kubernetes-preserve-unknown-fields.
            if isinstance(value, dict) and "properties" not in node:
                out["additionalProperties"] = _convert(value, defs, f"{path}{{}}")
        else:
            # A copy: a list shared between two nodes would dump as a YAML alias.
            out[key] = copy.deepcopy(value)
    if "type" not in out and not out.get(INT_OR_STRING):
        if "properties" in out or out.get("x-kubernetes-preserve-unknown-fields"):
            out["type"] = "object"
        elif "enum" in out and all(isinstance(v, str) for v in out["enum"]):
            out["type"] = "string"
        else:
            raise SchemaError(f"{path}: no type")
    return out
