"""What the console shows, computed from the raw custom resources (pure functions).

``summarize`` turns one object into a row (its health, conditions, endpoint, age) and
``topology`` the objects into a graph: agents, their delegation edges
(``agentNetwork.access``), their MCP servers, ModelAPIs and MemoryStore. Health and the
tone of each condition come from ``kaos_cli.health``, as in the CLI, so a state reads in
the same colour in both. ``status_notes`` reconciles the operator's word on an object with
the console's own probe of its Service, so a banner never contradicts the badge beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from kaos_core.crds import reasons

from kaos_cli.health import Health, Tone, condition_tone, health
from kaos_cli.kinds import KINDS

UNKNOWN = Health("Unknown", "unknown")  # a node drawn for a reference: no object, no health
# A banner's tone: the health tones that call for one, and "hint" (what to do next).
NoteTone = Literal["error", "warn", "progress", "hint"]


@dataclass(frozen=True)
class Note:
    """A banner: what is wrong or worth knowing, its tone, and which check says so
    (``operator``: the resource's conditions; ``probe``: the console's own request to
    the Service; ``cluster``: a kubectl call; ``input``: the page's own parameters)."""

    tone: NoteTone
    message: str
    check: str = "cluster"
    problem: str = ""  # kubectl's word for the failure (unreachable, forbidden, ...)


@dataclass(frozen=True)
class Missing:
    """An object a page asked for that is not there, and what the console found instead."""

    kind: str  # Agent | MemoryStore
    name: str
    namespace: str
    close: tuple[str, ...] = ()  # names in the namespace like the one asked for
    elsewhere: tuple[str, ...] = ()  # other namespaces with an object of this very name
    known: tuple[str, ...] | None = None  # every name in the namespace; None: not listed
    namespace_exists: bool | None = None  # None: not known


class PageError(Exception):
    """A page that cannot be shown: raised by a handler (or the guard), drawn as an error
    page in one place (``pages.errors``) with its status and the console's own words."""

    def __init__(self, status: int, title: str, message: str, problem: str = "failed") -> None:
        super().__init__(message)
        self.status = status
        self.title = title
        self.message = message
        self.problem = problem


class NotFound(PageError):
    """The page's object does not exist: a 404 that suggests where to go instead."""

    def __init__(self, missing: Missing) -> None:
        super().__init__(
            404,
            f"No {missing.kind} {missing.name} in namespace {missing.namespace}",
            f"no {missing.kind} {missing.name} in namespace {missing.namespace}",
            "not-found",
        )
        self.missing = missing


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str

    @property
    def tone(self) -> Tone:
        return condition_tone(self.type, self.status, self.reason)

    @property
    def bad(self) -> bool:
        """Worth a reason on its chip: anything but the normal state of its polarity."""
        return self.tone != "ok"


@dataclass(frozen=True)
class Row:
    kind: str
    namespace: str
    name: str
    phase: str
    conditions: tuple[Condition, ...]
    endpoint: str
    age: str
    health: Health = UNKNOWN
    spec: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def degraded(self) -> Condition | None:
        return next(
            (c for c in self.conditions if c.type == reasons.MEMORY_DEGRADED and c.bad), None
        )

    @property
    def ready(self) -> Condition | None:
        return next((c for c in self.conditions if c.type == reasons.READY), None)


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
        health=health(obj),
        spec=dict(obj.get("spec") or {}),
    )


def _said(c: Condition) -> str:
    return f"{c.type}={c.status}{' ' + c.reason if c.reason else ''}" + (
        f": {c.message}" if c.message else ""
    )


def status_notes(row: Row, what: str, probe_failed: str | None, then: str = "") -> list[Note]:
    """The banners for one object: the operator's word when it is not plainly Ready, and
    the console's own probe of its Service (``what``: "its agent card", ...) when that
    failed (``probe_failed``: the cause, "" when unknown; ``None``: the probe answered;
    ``then``: what follows for the page).

    Each says which check it comes from. A probe that fails on an object the operator
    calls Ready is a warning naming the probe, never a red error beside a green badge; on
    an object that is not Ready, the operator's condition leads and the probe's failure
    is only what follows from it."""
    label = f"{row.kind} {row.name}"
    cause = f" ({probe_failed})" if probe_failed else ""
    state = row.health
    ready = row.ready
    if state.tone in ("ok", "warn"):  # Ready, perhaps degraded
        notes: list[Note] = []
        if row.degraded is not None:
            notes.append(Note("warn", f"Operator: {label} is {state.word}, "
                              f"{_said(row.degraded)}", "operator"))  # fmt: skip
        if probe_failed is not None:
            notes.append(Note("warn", f"Console probe failed: {what} did not answer"
                              f"{cause}, though the operator reports {label} Ready."
                              f"{' ' + then if then else ''}", "probe"))  # fmt: skip
        return notes
    if ready is None:
        said = (
            f"Operator: {label} has no Ready condition yet: the operator has not reported on it "
            "(is an operator running? kaos system status)"
        )
    else:
        said = f"Operator: {label} is {state.word}, {_said(ready)}"
    tone: NoteTone = "error" if state.tone == "error" else "progress"
    if probe_failed is not None:
        expected = "" if tone == "error" else ", as expected until it is Ready"
        said += f". Console probe failed too{expected}: {what} did not answer{cause}"
    return [Note(tone, said, "operator")]


@dataclass(frozen=True)
class Node:
    id: str  # "<Kind>/<name>", unique within a namespace
    kind: str
    name: str
    phase: str  # "" for a reference to an object that does not exist
    health: Health = UNKNOWN

    @property
    def degraded(self) -> bool:
        return self.health.degraded


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
        key: Node(key, r.kind, r.name, r.phase, r.health) for key, r in present.items()
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
