"""The four KAOS kinds, derived from the CRD models (``kaos_core.crds``).

The models give each kind its name, plural and resource (``agents.kaos.tools``), the same
ones the generated CRDs declare; this table adds only what the CLI and the console show or
reach: the command group, the list's columns (coloured by ``kaos_cli.health``; an
Agent's HEALTH says Degraded when it is Ready but its memory is not), the container whose
logs matter and the ports clients reach the Services on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kaos_core.crds import Agent, CustomObject, MCPServer, MemoryStore, ModelAPI
from kaos_core.crds.common import KindInfo

from kaos_cli.health import condition_tone, health, phase_tone
from kaos_cli.objects import age, condition, ready_of, spec, status
from kaos_cli.output import Toned

Column = tuple[str, Callable[[dict[str, Any]], object]]

# The ports the operator gives the Services a client talks to (when the status names none).
AGENT_PORT = 8000
MEMORY_PORT = 8080


@dataclass(frozen=True)
class Kind:
    """One KAOS kind as the CLI presents it."""

    cli: str  # the command group: kaos <cli> list
    model: type[CustomObject]
    containers: tuple[str, ...]  # the pod's main container, in order of preference
    columns: tuple[Column, ...]  # what ``list`` shows after the name
    article: str = "a"

    @property
    def info(self) -> KindInfo:
        return self.model.info

    @property
    def kind(self) -> str:
        return self.info.kind

    @property
    def plural(self) -> str:
        return self.info.plural

    @property
    def resource(self) -> str:
        return self.info.crd_name

    @property
    def component(self) -> str:
        """The ``app.kubernetes.io/name`` the operator labels the kind's objects with."""
        return self.kind.lower()

    def selector(self, name: str) -> str:
        return f"app.kubernetes.io/name={self.component},app.kubernetes.io/instance={name}"

    @property
    def a(self) -> str:
        """The kind with its article: an Agent, a ModelAPI, an MCPServer."""
        return f"{self.article} {self.kind}"

    def missing(self) -> str:
        return f"list them with: kaos {self.cli} list"


def _memory(obj: dict[str, Any]) -> str:
    memory = (spec(obj).get("config") or {}).get("memory") or {}
    text = str(memory.get("type", "local"))
    return f"{text}:{memory['memoryStore']}" if memory.get("memoryStore") else text


def _models(obj: dict[str, Any]) -> str:
    s = spec(obj)
    if s.get("mode") == "Hosted":
        return str((s.get("serverConfig") or {}).get("model") or "-")
    return ",".join((s.get("proxyConfig") or {}).get("models") or status(obj).get("models") or [])


def _replicas(obj: dict[str, Any]) -> str:
    st = status(obj)
    if st.get("replicas") is None:
        return "-"
    return f"{st.get('readyReplicas') or 0}/{st.get('replicas')}"


def _phase(obj: dict[str, Any]) -> Toned:
    phase = status(obj).get("phase")
    return Toned(phase, phase_tone(phase))


def _ready(obj: dict[str, Any]) -> Toned:
    value = ready_of(obj)
    reason = (condition(obj, "Ready") or {}).get("reason") or ""
    return Toned(value, condition_tone("Ready", value, str(reason)))


def _health(obj: dict[str, Any]) -> Toned:
    """Ready, Degraded (Ready but its memory is not), Failed, or the phase on its way."""
    verdict = health(obj)
    return Toned(verdict.word, verdict.tone)


PHASE: Column = ("phase", _phase)
ENDPOINT: Column = ("endpoint", lambda o: status(o).get("endpoint"))
AGE: Column = ("age", age)

AGENT = Kind(
    "agent",
    Agent,
    ("agent",),
    (
        ("modelapi", lambda o: spec(o).get("modelAPI")),
        ("model", lambda o: spec(o).get("model")),
        ("mcp", lambda o: ",".join(spec(o).get("mcpServers") or [])),
        ("memory", _memory),
        ("delegates", lambda o: ",".join((spec(o).get("agentNetwork") or {}).get("access") or [])),
        PHASE,
        ("ready", _ready),
        ("health", _health),
        AGE,
    ),
    article="an",
)
MODELAPI = Kind(
    "modelapi",
    ModelAPI,
    ("litellm", "ollama"),
    (("mode", lambda o: spec(o).get("mode")), ("models", _models), PHASE, ENDPOINT, AGE),
)
MCP = Kind(
    "mcp",
    MCPServer,
    ("mcp",),
    (("runtime", lambda o: spec(o).get("runtime")), PHASE, ENDPOINT, AGE),
    article="an",
)
MEMORYSTORE = Kind(
    "memorystore",
    MemoryStore,
    ("memory",),
    (
        ("storage", lambda o: (spec(o).get("storage") or {}).get("type", "local")),
        ("ready", _replicas),
        PHASE,
        ENDPOINT,
        AGE,
    ),
)
KINDS = (AGENT, MODELAPI, MCP, MEMORYSTORE)
BY_KIND = {k.kind: k for k in KINDS}
CRD_NAMES = tuple(k.resource for k in KINDS)
