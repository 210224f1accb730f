"""The objects a KAOS object names in its spec, and which ones the operator could not find
(pure).

An Agent names its ModelAPI, its MCPServers and its MemoryStore; a MemoryStore the
ModelAPIs of its two model roles. The operator reports a missing one in a condition
(``ModelAPINotFound``: "ModelAPI devmodl not found"); ``--wait`` reads that to say which
field names it, so the user knows what to fix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kaos_core.crds import reasons

from kaos_cli.objects import spec, status

# The reasons of a referenced object that does not exist, and the kind each one names.
NOT_FOUND = {
    reasons.MODEL_API_NOT_FOUND: "ModelAPI",
    reasons.MCP_SERVER_NOT_FOUND: "MCPServer",
    reasons.MEMORY_STORE_NOT_FOUND: "MemoryStore",
}
_MISSING = re.compile(
    r"\b(?P<kind>ModelAPI|MCPServer|MemoryStore) (?P<name>[a-z0-9][a-z0-9.-]*) not found"
)


@dataclass(frozen=True)
class Reference:
    """One name in a spec: the kind it names, the field that holds it, the name."""

    kind: str
    field: str
    name: str


def references(obj: dict[str, Any]) -> list[Reference]:
    """Every object ``obj``'s spec names, with the field that names it."""
    s = spec(obj)
    found: list[Reference] = []
    if obj.get("kind") == "Agent":
        if s.get("modelAPI"):
            found.append(Reference("ModelAPI", "spec.modelAPI", str(s["modelAPI"])))
        for i, server in enumerate(s.get("mcpServers") or []):
            found.append(Reference("MCPServer", f"spec.mcpServers[{i}]", str(server)))
        store = ((s.get("config") or {}).get("memory") or {}).get("memoryStore")
        if store:
            found.append(Reference("MemoryStore", "spec.config.memory.memoryStore", str(store)))
    elif obj.get("kind") == "MemoryStore":
        for role in ("summarization", "embedding"):
            api = ((s.get("models") or {}).get(role) or {}).get("modelAPI")
            if api:
                found.append(Reference("ModelAPI", f"spec.models.{role}.modelAPI", str(api)))
    return found


def current(obj: dict[str, Any]) -> bool:
    """Whether the status speaks of the spec as it is now (the operator has seen the
    latest change), so what it says is not about an earlier version."""
    generation = (obj.get("metadata") or {}).get("generation")
    observed = status(obj).get("observedGeneration")
    return generation is not None and observed is not None and observed >= generation


def missing(obj: dict[str, Any]) -> list[Reference]:
    """The references the operator reports as not found, in the spec's order."""
    named: set[tuple[str, str]] = set()
    for c in status(obj).get("conditions") or []:
        if c.get("status") == "True":
            continue
        text = str(c.get("message") or "")
        named.update((m.group("kind"), m.group("name")) for m in _MISSING.finditer(text))
        kind = NOT_FOUND.get(str(c.get("reason") or ""))
        if kind and not any(k == kind for k, _ in named):
            # The reason without a readable message: every reference of that kind.
            named.update((r.kind, r.name) for r in references(obj) if r.kind == kind)
    return [r for r in references(obj) if (r.kind, r.name) in named]
