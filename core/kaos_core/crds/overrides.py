"""``container`` and ``pod``: what a platform team adds to the pods the operator makes.

The shapes are Kubernetes' own (EnvVar, EnvFromSource, ResourceRequirements, VolumeMount,
Toleration, Affinity, TopologySpreadConstraint, LocalObjectReference, Volume), written as
models so the generated schema validates them at admission: a misspelt operator, an
``Exists`` toleration with a value or a volume with two sources is refused by the API
server with the field's path, before the operator sees it.

What the operator itself sets is not overridable: its env names, ports, probes and
security contexts. The fields that would override them (``ports``, the probes,
``securityContext``) are declared, free-form, only so that an attempt reaches the operator
instead of being pruned silently: the operator refuses it with a condition and an Event
(``kaos_operator.desired.overrides`` holds the merge rule).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, WithJsonSchema

from kaos_core.crds.common import LIST_MAX, NAME_MAX, CRDModel, cel

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


def _map_list(*keys: str) -> dict[str, Any]:
    """A list the API server treats as a map keyed by ``keys`` (duplicates refused)."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


def _exactly_one(fields: tuple[str, ...], message: str) -> dict[str, Any]:
    rule = "[" + ", ".join(f"has(self.{f})" for f in fields) + "].filter(x, x).size() == 1"
    return cel((rule, message))


# -- the container ------------------------------------------------------------------------


class KeyRef(CRDModel):
    """A key of a Secret or ConfigMap in the resource's namespace."""

    name: ObjectName
    key: str = Field(min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$")
    optional: bool | None = None


class FieldRef(CRDModel):
    """A field of the pod (downward API), e.g. metadata.name or status.podIP."""

    field_path: str = Field(min_length=1, max_length=256)
    api_version: str | None = Field(default=None, max_length=64)


class ResourceFieldRef(CRDModel):
    """A resource of a container (downward API), e.g. limits.memory."""

    resource: str = Field(min_length=1, max_length=64)
    container_name: str | None = Field(default=None, max_length=NAME_MAX)
    divisor: Quantity | None = None


class EnvVarSource(CRDModel):
    model_config = ConfigDict(
        json_schema_extra=_exactly_one(
            ("secretKeyRef", "configMapKeyRef", "fieldRef", "resourceFieldRef"),
            "valueFrom takes exactly one of secretKeyRef, configMapKeyRef, fieldRef,"
            " resourceFieldRef",
        )
    )

    secret_key_ref: KeyRef | None = None
    config_map_key_ref: KeyRef | None = None
    field_ref: FieldRef | None = None
    resource_field_ref: ResourceFieldRef | None = None


class EnvVar(CRDModel):
    """An environment variable: a literal value, or a value from a Secret/ConfigMap key."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!(has(self.value) && has(self.valueFrom))",
                "an env entry takes value or valueFrom, not both",
            )
        )
    )

    name: str = Field(min_length=1, max_length=256, pattern=ENV_NAME)
    value: str | None = Field(default=None, max_length=64 * 1024)
    value_from: EnvVarSource | None = None


class SourceRef(CRDModel):
    name: ObjectName
    optional: bool | None = None


class EnvFromSource(CRDModel):
    """Every key of a Secret or ConfigMap as environment variables."""

    model_config = ConfigDict(
        json_schema_extra=_exactly_one(
            ("secretRef", "configMapRef"), "envFrom takes exactly one of secretRef, configMapRef"
        )
    )

    prefix: str | None = Field(default=None, max_length=128, pattern=r"^[-._a-zA-Z0-9]*$")
    secret_ref: SourceRef | None = None
    config_map_ref: SourceRef | None = None


class ResourceRequirements(CRDModel):
    """Compute requests and limits, as in a Pod spec."""

    limits: dict[str, Quantity] | None = Field(default=None, max_length=16)
    requests: dict[str, Quantity] | None = Field(default=None, max_length=16)


class VolumeMount(CRDModel):
    name: str = Field(min_length=1, max_length=NAME_MAX, pattern=VOLUME_NAME)
    mount_path: str = Field(min_length=1, max_length=1024, pattern=r"^/")
    sub_path: str | None = Field(default=None, max_length=1024, pattern=r"^[^/]")
    read_only: bool | None = None


class ContainerOverride(CRDModel):
    """Added to the operator's container: env, envFrom, resources, volume mounts.

    env and volumeMounts are appended after the operator's own; a name (mount path) the
    operator already uses is refused. resources replaces spec.resources (set one). The
    remaining fields belong to the operator and are refused when set.
    """

    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=LIST_MAX,
        json_schema_extra=_map_list("name"),
        description="Extra environment variables: value, or valueFrom a Secret/ConfigMap key.",
    )
    env_from: list[EnvFromSource] = Field(
        default_factory=list,
        max_length=16,
        description="Every key of a Secret or ConfigMap as variables; the operator's own "
        "variables win over them (Kubernetes: env over envFrom).",
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Requests and limits; replaces spec.resources (set one)."
    )
    volume_mounts: list[VolumeMount] = Field(
        default_factory=list,
        max_length=LIST_MAX,
        json_schema_extra=_map_list("mountPath"),
        description="Extra mounts of pod.volumes (or of the operator's volumes).",
    )
    ports: FreeFormList | None = Field(
        default=None, description="Refused: the operator's ports are fixed."
    )
    liveness_probe: FreeForm | None = Field(
        default=None, description="Refused: the operator's probes are fixed."
    )
    readiness_probe: FreeForm | None = Field(
        default=None, description="Refused: the operator's probes are fixed."
    )
    startup_probe: FreeForm | None = Field(
        default=None, description="Refused: the operator's probes are fixed."
    )
    security_context: FreeForm | None = Field(
        default=None, description="Refused: the operator's security context is fixed."
    )


# -- the pod ------------------------------------------------------------------------------

TolerationOperator = Literal["Exists", "Equal"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(CRDModel):
    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.operator) || self.operator != 'Exists' || !has(self.value)"
                " || self.value == ''",
                "a toleration with operator Exists takes no value",
            ),
            (
                "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
                "tolerationSeconds needs effect NoExecute",
            ),
            (
                "has(self.key) || (has(self.operator) && self.operator == 'Exists')",
                "a toleration without a key needs operator Exists",
            ),
        )
    )

    key: str | None = Field(default=None, max_length=317)
    operator: TolerationOperator | None = None
    value: str | None = Field(default=None, max_length=63)
    effect: TaintEffect | None = None
    toleration_seconds: int | None = None


SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
NodeOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
_VALUES_RULE = (
    "self.operator in ['Exists', 'DoesNotExist'] ? !has(self.values) || size(self.values) == 0"
    " : has(self.values) && size(self.values) > 0",
    "In, NotIn, Gt and Lt need values; Exists and DoesNotExist take none",
)
Values = list[Annotated[str, Field(max_length=NAME_MAX)]]


class LabelSelectorRequirement(CRDModel):
    model_config = ConfigDict(json_schema_extra=cel(_VALUES_RULE))

    key: Key
    operator: SelectorOperator
    values: Values | None = Field(default=None, max_length=LIST_MAX)


class LabelSelector(CRDModel):
    match_labels: dict[str, ShortText] | None = Field(default=None, max_length=LIST_MAX)
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, max_length=LIST_MAX
    )


class NodeSelectorRequirement(CRDModel):
    model_config = ConfigDict(json_schema_extra=cel(_VALUES_RULE))

    key: Key
    operator: NodeOperator
    values: Values | None = Field(default=None, max_length=LIST_MAX)


class NodeSelectorTerm(CRDModel):
    match_expressions: list[NodeSelectorRequirement] | None = Field(
        default=None, max_length=LIST_MAX
    )
    match_fields: list[NodeSelectorRequirement] | None = Field(default=None, max_length=LIST_MAX)


class NodeSelector(CRDModel):
    node_selector_terms: list[NodeSelectorTerm] = Field(min_length=1, max_length=LIST_MAX)


class PreferredSchedulingTerm(CRDModel):
    weight: int = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinity(CRDModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = (
        Field(default=None, max_length=LIST_MAX)
    )


class PodAffinityTerm(CRDModel):
    topology_key: str = Field(min_length=1, max_length=317)
    label_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    namespaces: list[Annotated[str, Field(max_length=NAME_MAX)]] | None = Field(
        default=None, max_length=LIST_MAX
    )
    match_label_keys: list[Key] | None = Field(default=None, max_length=LIST_MAX)
    mismatch_label_keys: list[Key] | None = Field(default=None, max_length=LIST_MAX)


class WeightedPodAffinityTerm(CRDModel):
    weight: int = Field(ge=1, le=100)
    pod_affinity_term: PodAffinityTerm


class PodAffinity(CRDModel):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = Field(
        default=None, max_length=LIST_MAX
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = (
        Field(default=None, max_length=LIST_MAX)
    )


class Affinity(CRDModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(CRDModel):
    max_skew: int = Field(ge=1)
    topology_key: str = Field(min_length=1, max_length=317)
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    label_selector: LabelSelector | None = None
    min_domains: int | None = Field(default=None, ge=1)
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    match_label_keys: list[Key] | None = Field(default=None, max_length=LIST_MAX)


class LocalObjectReference(CRDModel):
    name: ObjectName


class KeyToPath(CRDModel):
    key: str = Field(min_length=1, max_length=253)
    path: str = Field(min_length=1, max_length=1024, pattern=r"^[^/]")
    mode: int | None = Field(default=None, ge=0, le=0o777)


class ConfigMapVolume(CRDModel):
    name: ObjectName
    items: list[KeyToPath] | None = Field(default=None, max_length=LIST_MAX)
    default_mode: int | None = Field(default=None, ge=0, le=0o777)
    optional: bool | None = None


class SecretVolume(CRDModel):
    secret_name: ObjectName
    items: list[KeyToPath] | None = Field(default=None, max_length=LIST_MAX)
    default_mode: int | None = Field(default=None, ge=0, le=0o777)
    optional: bool | None = None


class EmptyDirVolume(CRDModel):
    medium: Literal["", "Memory"] | None = None
    size_limit: Quantity | None = None


class ClaimVolume(CRDModel):
    claim_name: ObjectName
    read_only: bool | None = None


VOLUME_SOURCES = ("configMap", "secret", "emptyDir", "persistentVolumeClaim")


class Volume(CRDModel):
    """A pod volume from a ConfigMap, a Secret, an emptyDir or a claim."""

    model_config = ConfigDict(
        json_schema_extra=_exactly_one(
            VOLUME_SOURCES,
            "a volume takes exactly one of configMap, secret, emptyDir, persistentVolumeClaim",
        )
    )

    name: str = Field(min_length=1, max_length=NAME_MAX, pattern=VOLUME_NAME)
    config_map: ConfigMapVolume | None = None
    secret: SecretVolume | None = None
    empty_dir: EmptyDirVolume | None = None
    persistent_volume_claim: ClaimVolume | None = None


class PodOverride(CRDModel):
    """Added to the operator's pod template: scheduling, metadata, pull secrets, volumes.

    labels and annotations are merged into the template's (a key the operator sets, and
    any kaos.tools/ annotation, is refused); affinity replaces the operator's default
    spread; the other fields are the operator's to leave unset, so they are taken as given.
    """

    labels: dict[str, ShortText] | None = Field(
        default=None, max_length=LIST_MAX, description="Extra labels of the pods."
    )
    annotations: dict[str, Annotated[str, Field(max_length=TEXT_ANNOTATION)]] | None = Field(
        default=None, max_length=LIST_MAX, description="Extra annotations of the pods."
    )
    node_selector: dict[str, ShortText] | None = Field(default=None, max_length=LIST_MAX)
    tolerations: list[Toleration] | None = Field(default=None, max_length=LIST_MAX)
    affinity: Affinity | None = Field(
        default=None, description="Replaces the operator's default (a store's replica spread)."
    )
    topology_spread_constraints: list[TopologySpreadConstraint] | None = Field(
        default=None, max_length=16
    )
    priority_class_name: str | None = Field(default=None, max_length=253, pattern=SUBDOMAIN)
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None, max_length=16, json_schema_extra=_map_list("name")
    )
    volumes: list[Volume] | None = Field(
        default=None,
        max_length=LIST_MAX,
        json_schema_extra=_map_list("name"),
        description="Extra volumes; a name the operator uses is refused.",
    )
    security_context: FreeForm | None = Field(
        default=None, description="Refused: the operator's pod security context is fixed."
    )


def container_field() -> Any:
    return Field(
        default=None,
        description="Added to the operator's container (env, envFrom, resources, volume mounts).",
    )


def pod_field() -> Any:
    return Field(
        default=None,
        description="Added to the operator's pod template (labels, annotations, scheduling, "
        "pull secrets, volumes).",
    )
