"""What the overview shows, computed from the raw custom resources (pure functions).

``summarize`` turns one object into a row (phase, conditions, endpoint, age) and
``topology`` the objects into a graph: agents, their delegation edges
(``agentNetwork.access``), their MCP servers, ModelAPIs and MemoryStore.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kaos_cli.kinds import KINDS


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str

    @property
    def bad(self) -> bool:
        """A condition worth a warning colour: MemoryDegraded True, anything else not True."""
        if self.type == "MemoryDegraded":
            return self.status == "True"
        return self.status != "True"


@dataclass(frozen=True)
class Row:
    kind: str
    namespace: str
    name: str
    phase: str
    conditions: tuple[Condition, ...]
    endpoint: str
    age: str
    spec: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def degraded(self) -> Condition | None:
        return next((c for c in self.conditions if c.type == "MemoryDegraded" and c.bad), None)


def age(created: str | None, now: datetime) -> str:
    """kubectl's short age: 42s, 5m, 3h, 2d."""
    if not created:
        return "-"
    try:
        then = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return "-"
    seconds = max(0, int((now - then).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def summarize(kind: str, obj: dict[str, Any], now: datetime | None = None) -> Row:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    conditions = tuple(
        Condition(
            type=str(c.get("type") or ""),
            status=str(c.get("status") or "Unknown"),
            reason=str(c.get("reason") or ""),
            message=str(c.get("message") or ""),
        )
        for c in status.get("conditions") or []
    )
    return Row(
        kind=kind,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        phase=str(status.get("phase") or "Pending"),
        conditions=conditions,
        endpoint=str(status.get("endpoint") or ""),
        age=age(meta.get("creationTimestamp"), now or datetime.now(UTC)),
        spec=dict(obj.get("spec") or {}),
    )


@dataclass(frozen=True)
class Node:
    id: str  # "<Kind>/<name>", unique within a namespace
    kind: str
    name: str
    phase: str  # "" for a reference to an object that does not exist
    degraded: bool = False


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    label: str  # delegates | tools | model | memory


@dataclass(frozen=True)
class Graph:
    namespace: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


def _agent_refs(spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(kind, name, label) of everything an Agent's spec points at."""
    refs: list[tuple[str, str, str]] = []
    for peer in (spec.get("agentNetwork") or {}).get("access") or []:
        refs.append(("Agent", str(peer), "delegates"))
    for server in spec.get("mcpServers") or []:
        refs.append(("MCPServer", str(server), "tools"))
    if spec.get("modelAPI"):
        refs.append(("ModelAPI", str(spec["modelAPI"]), "model"))
    memory = (spec.get("config") or {}).get("memory") or {}
    if memory.get("memoryStore"):
        refs.append(("MemoryStore", str(memory["memoryStore"]), "memory"))
    return refs


def topology(rows: list[Row], namespace: str) -> Graph:
    """The namespace's graph; a reference to a missing object is a node without a phase."""
    present = {f"{r.kind}/{r.name}": r for r in rows if r.namespace == namespace}
    nodes: dict[str, Node] = {
        key: Node(key, r.kind, r.name, r.phase, r.degraded is not None)
        for key, r in present.items()
    }
    edges: list[Edge] = []
    for key, row in sorted(present.items()):
        if row.kind != "Agent":
            continue
        for kind, name, label in _agent_refs(row.spec):
            target = f"{kind}/{name}"
            nodes.setdefault(target, Node(target, kind, name, ""))
            edges.append(Edge(key, target, label))
    order = {k.kind: i for i, k in enumerate(KINDS)}
    ordered = sorted(nodes.values(), key=lambda n: (order.get(n.kind, 9), n.name))
    return Graph(namespace, tuple(ordered), tuple(edges))
