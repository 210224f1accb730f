"""Kubernetes value shapes the override models share: quantities, object names, label keys,
free-form blocks, and the list and one-of rules of their schemas."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from kaos_core.crds.common import cel

# A Kubernetes resource.Quantity: an integer, or a string such as 500m, 1Gi or 1e3.
QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]"
    r"|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
Quantity = Annotated[
    int | Annotated[str, Field(max_length=64, pattern=QUANTITY)],
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
# A name of a ConfigMap, Secret, claim or priority class (DNS-1123 subdomain).
SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
ObjectName = Annotated[str, Field(min_length=1, max_length=253, pattern=SUBDOMAIN)]
# An environment variable name as the API server accepts it for a container.
ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
# A volume name (DNS-1123 label).
VOLUME_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# A label key, with its optional prefix (example.com/name).
Key = Annotated[str, Field(min_length=1, max_length=317)]
ShortText = Annotated[str, Field(max_length=1024)]
TEXT_ANNOTATION = 64 * 1024

FreeForm = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]
FreeFormList = Annotated[
    list[dict[str, Any]],
    WithJsonSchema(
        {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        }
    ),
]


def map_list(*keys: str) -> dict[str, Any]:
    """A list the API server treats as a map keyed by ``keys`` (duplicates refused)."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


def exactly_one(fields: tuple[str, ...], message: str) -> dict[str, Any]:
    """A CEL rule: exactly one of ``fields`` is set."""
    rule = "[" + ", ".join(f"has(self.{f})" for f in fields) + "].filter(x, x).size() == 1"
    return cel((rule, message))
