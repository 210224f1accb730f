"""Building blocks shared by every KAOS custom resource.

``CRDModel`` gives the camelCase wire names Kubernetes uses; ``CustomObject`` is the
typed view of a whole object (metadata, spec, status); ``cel`` attaches
``x-kubernetes-validations`` rules to a model's schema; ``KindInfo`` carries what the CRD
generator needs beyond the schema (names, printer columns).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

GROUP = "kaos.tools"
VERSION = "v1alpha1"

# Bounds that keep the API server's CEL cost estimate finite (unbounded strings and lists
# make even a simple rule "too expensive") and match Kubernetes' own limits.
NAME_MAX = 63
TEXT_MAX = 64 * 1024
LIST_MAX = 64

# A DNS-1035 label: what a Service name must be, and so every name we derive one from.
DNS_LABEL = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"


class CRDModel(BaseModel):
    """Base of spec and status models: camelCase on the wire, unknown fields ignored.

    Unknown fields are ignored rather than refused so an older operator can read objects
    written against a newer schema; the API server's structural pruning is what keeps
    undeclared fields out of storage.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
    )

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server stores it (camelCase, unset fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


def cel(*rules: tuple[str, str]) -> dict[str, Any]:
    """``json_schema_extra`` carrying CEL validation rules with their messages."""
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


def ref_name(description: str, *, alias: str | None = None) -> Any:
    """A required reference to another object of the same namespace, by name."""
    return Field(
        min_length=1,
        max_length=NAME_MAX,
        pattern=DNS_LABEL,
        description=description,
        alias=alias,
    )


def defaulted(model: type[CRDModel]) -> Any:
    """A nested block that is present with all its defaults when omitted.

    The schema default is the model's complete defaulted form rather than ``{}``: the API
    server does not default inside a default, and it checks CEL rules against the default
    itself, so a rule reading ``self.type`` would fail on ``{}``.
    """
    return Field(default_factory=model, json_schema_extra={"default": model().to_wire()})


class SecretKeyRef(CRDModel):
    """A key of a Secret in the resource's own namespace."""

    name: str = Field(min_length=1, max_length=253, description="Name of the Secret.")
    key: str = Field(min_length=1, max_length=253, description="Key within the Secret.")


class Telemetry(CRDModel):
    """Tracing of the resource's pods: OpenTelemetry spans over OTLP/HTTP.

    Every field left out takes the chart's global default (``telemetry`` in the values);
    the operator projects the result into the pods as the standard ``OTEL_*`` variables.
    """

    enabled: bool | None = Field(
        default=None, description="false: no tracing for this resource, whatever the default."
    )
    endpoint: str | None = Field(
        default=None,
        max_length=512,
        pattern=r"^https?://\S+$",
        description="Base URL of an OTLP/HTTP receiver, e.g. http://jaeger.observability:4318.",
    )
    sampling_ratio: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Share of traces kept (0 to 1), decided where a trace starts.",
    )
    capture_content: bool | None = Field(
        default=None,
        description="Record content on spans: prompts, completions, tool arguments, memory "
        "queries and records. Personal data: off unless set.",
    )


def replicas_field() -> Any:
    """``spec.replicas`` of a kind that may run any number of pods."""
    return Field(
        default=1,
        ge=0,
        le=100,
        description="Pods the Deployment runs; 0 stops the resource without deleting it.",
    )


def image_field(default_image: str) -> Any:
    """``spec.image``: the container image, instead of ``default_image`` (in words)."""
    return Field(
        default=None,
        max_length=512,
        description=f"Container image to run instead of {default_image} (e.g. from a "
        "mirror registry, or a build with extra packages).",
    )


def resources_field() -> Any:
    """``spec.resources``: free-form, as in a Pod spec."""
    return Field(
        default=None,
        description="Container resources (requests, limits), as in a Pod spec, e.g. "
        "{requests: {cpu: 100m, memory: 256Mi}, limits: {memory: 1Gi}}.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


def telemetry_field() -> Any:
    return Field(
        default=None,
        description="Tracing (OpenTelemetry) of this resource's pods; unset fields take the "
        "chart's default.",
    )


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(CRDModel):
    """One aspect of the resource's state, as the Kubernetes API conventions define it."""

    type: str = Field(max_length=316, description="Condition type, e.g. Ready.")
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        description="CamelCase reason for the last transition.",
    )
    message: str = Field(
        default="",
        max_length=32768,
        description="What the state is and, when not the desired one, what to do.",
    )
    last_transition_time: str = Field(
        json_schema_extra={"format": "date-time"},
        description="When status last changed.",
    )
    observed_generation: int | None = Field(
        default=None, ge=0, description="metadata.generation this condition was set for."
    )


def _conditions_extra() -> dict[str, Any]:
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}


class CommonStatus(CRDModel):
    """Status fields every KAOS resource has."""

    phase: str | None = Field(
        default=None,
        description="One-word summary: Pending (being rolled out), Waiting (on a dependency), "
        "Ready, or Failed (needs a change of spec or cluster; the message says which).",
    )
    endpoint: str | None = Field(default=None, description="In-cluster URL of the service.")
    message: str | None = Field(default=None, description="Why the resource is in this phase.")
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="metadata.generation the operator last reconciled; lower than "
        "metadata.generation while a spec change is not handled yet.",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        json_schema_extra=_conditions_extra(),
        description="Each aspect of the state (Ready, DependenciesReady, MemoryDegraded...) "
        "with a reason and a message.",
    )

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)

    def is_true(self, type_: str) -> bool:
        cond = self.condition(type_)
        return cond is not None and cond.status == "True"


class ObjectMeta(BaseModel):
    """The parts of ``metadata`` the operator reads; the rest is ignored."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    name: str
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    deletion_timestamp: str | None = None


class CustomObject(BaseModel):
    """A whole custom object: apiVersion, kind, metadata, spec and status."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    api_version: str = f"{GROUP}/{VERSION}"
    kind: str
    metadata: ObjectMeta
    info: ClassVar[KindInfo]

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0


@dataclass(frozen=True)
class KindInfo:
    """What the generator and the operator need to know about a kind beyond its schema."""

    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    description: str
    spec: type[CRDModel]
    status: type[CRDModel]
    printer_columns: tuple[PrinterColumn, ...] = field(default=())

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"


AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")
PHASE = PrinterColumn("Phase", ".status.phase")
ENDPOINT = PrinterColumn("Endpoint", ".status.endpoint", priority=1)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_N = TypeVar("_N", bound=_Named)


def unique_names(kind: str) -> AfterValidator:
    """A list's validator refusing two items of one name (the API server's CEL rule of
    ``unique_names_rule`` says the same), naming the repeated ones."""

    def check(items: list[_N]) -> list[_N]:
        names = [i.name for i in items]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"{kind} names must be unique: {', '.join(repeated)} repeated")
        return items

    return AfterValidator(check)


def unique_names_rule(kind: str) -> tuple[str, str]:
    """The CEL rule of a list whose items' names are unique."""
    return ("self.all(s, self.exists_one(t, t.name == s.name))", f"{kind} names must be unique")
