"""``container`` and ``pod``: what a platform team adds to the pods the operator makes.

The shapes are Kubernetes' own (EnvVar, EnvFromSource, ResourceRequirements, VolumeMount,
Toleration, Affinity, TopologySpreadConstraint, LocalObjectReference, Volume), written as
models so the generated schema validates them at admission: a misspelt operator, an
``Exists`` toleration with a value or a volume with two sources is refused by the API
server with the field's path, before the operator sees it. Scheduling shapes are in
``kaos_core.crds.scheduling``, volumes in ``kaos_core.crds.volumes``.

What the operator itself sets is not overridable: its env names, ports, probes and
security contexts. The fields that would override them (``ports``, the probes,
``securityContext``) are declared, free-form, only so that an attempt reaches the operator
instead of being pruned silently: the operator refuses it with a condition and an Event
(``kaos_operator.desired.overrides`` holds the merge rule).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field

from kaos_core.crds.common import LIST_MAX, NAME_MAX, CRDModel, cel
from kaos_core.crds.scheduling import Affinity, Toleration, TopologySpreadConstraint
from kaos_core.crds.shapes import (
    ENV_NAME,
    SUBDOMAIN,
    TEXT_ANNOTATION,
    FreeForm,
    FreeFormList,
    ObjectName,
    Quantity,
    ShortText,
    exactly_one,
    map_list,
)
from kaos_core.crds.volumes import Volume, VolumeMount

# -- the container ------------------------------------------------------------------------


class KeyRef(CRDModel):
    """A key of a Secret or ConfigMap in the resource's namespace."""

    name: ObjectName = Field(description="The Secret or ConfigMap.")
    key: str = Field(
        min_length=1, max_length=253, pattern=r"^[-._a-zA-Z0-9]+$", description="Its key."
    )
    optional: bool | None = Field(
        default=None,
        description="Start the container even when the object or key does not exist "
        "(the variable is then unset).",
    )


class FieldRef(CRDModel):
    """A field of the pod (downward API), e.g. metadata.name or status.podIP."""

    field_path: str = Field(
        min_length=1,
        max_length=256,
        description="Path of the field, e.g. metadata.name, metadata.namespace, status.podIP.",
    )
    api_version: str | None = Field(
        default=None, max_length=64, description="Version the path is read in (default v1)."
    )


class ResourceFieldRef(CRDModel):
    """A resource of a container (downward API), e.g. limits.memory."""

    resource: str = Field(
        min_length=1,
        max_length=64,
        description="requests.cpu, requests.memory, limits.cpu, limits.memory...",
    )
    container_name: str | None = Field(
        default=None, max_length=NAME_MAX, description="Container whose resource is read."
    )
    divisor: Quantity | None = Field(
        default=None, description="Unit the value is expressed in, e.g. 1Mi (default 1)."
    )


class EnvVarSource(CRDModel):
    """Where a variable's value comes from: exactly one source."""

    model_config = ConfigDict(
        json_schema_extra=exactly_one(
            ("secretKeyRef", "configMapKeyRef", "fieldRef", "resourceFieldRef"),
            "valueFrom takes exactly one of secretKeyRef, configMapKeyRef, fieldRef,"
            " resourceFieldRef",
        )
    )

    secret_key_ref: KeyRef | None = Field(default=None, description="A key of a Secret.")
    config_map_key_ref: KeyRef | None = Field(default=None, description="A key of a ConfigMap.")
    field_ref: FieldRef | None = Field(default=None, description="A field of the pod.")
    resource_field_ref: ResourceFieldRef | None = Field(
        default=None, description="A request or limit of a container."
    )


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

    name: str = Field(
        min_length=1,
        max_length=256,
        pattern=ENV_NAME,
        description="Variable name; one the operator sets is refused.",
    )
    value: str | None = Field(
        default=None, max_length=64 * 1024, description="Literal value ($(NAME) expands)."
    )
    value_from: EnvVarSource | None = Field(
        default=None, description="Value read from a Secret, ConfigMap or the pod itself."
    )


class SourceRef(CRDModel):
    """A Secret or ConfigMap whose every key becomes a variable."""

    name: ObjectName = Field(description="The Secret or ConfigMap.")
    optional: bool | None = Field(
        default=None, description="Start the container even when it does not exist."
    )


class EnvFromSource(CRDModel):
    """Every key of a Secret or ConfigMap as environment variables."""

    model_config = ConfigDict(
        json_schema_extra=exactly_one(
            ("secretRef", "configMapRef"), "envFrom takes exactly one of secretRef, configMapRef"
        )
    )

    prefix: str | None = Field(
        default=None,
        max_length=128,
        pattern=r"^[-._a-zA-Z0-9]*$",
        description="Put before every key to make the variable's name.",
    )
    secret_ref: SourceRef | None = Field(default=None, description="Every key of a Secret.")
    config_map_ref: SourceRef | None = Field(default=None, description="Every key of a ConfigMap.")


class ResourceRequirements(CRDModel):
    """Compute requests and limits, as in a Pod spec."""

    limits: dict[str, Quantity] | None = Field(
        default=None,
        max_length=16,
        description="Most the container may use, e.g. cpu: 500m, memory: 1Gi (beyond its "
        "memory limit it is killed, OOMKilled).",
    )
    requests: dict[str, Quantity] | None = Field(
        default=None,
        max_length=16,
        description="What the scheduler reserves for the container, e.g. cpu: 100m, memory: 256Mi.",
    )


class ContainerOverride(CRDModel):
    """Added to the operator's container: env, envFrom, resources, volume mounts.

    env and volumeMounts are appended after the operator's own; a name (mount path) the
    operator already uses is refused. resources replaces spec.resources (set one). The
    remaining fields belong to the operator and are refused when set.
    """

    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=LIST_MAX,
        json_schema_extra=map_list("name"),
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
        json_schema_extra=map_list("mountPath"),
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


class LocalObjectReference(CRDModel):
    """An object of the resource's namespace, by name."""

    name: ObjectName = Field(description="The object's name.")


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
    node_selector: dict[str, ShortText] | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Node labels the pods' node must have (e.g. kubernetes.io/arch: amd64); "
        "a pod no node matches stays Pending, reason Unschedulable.",
    )
    tolerations: list[Toleration] | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Taints of nodes the pods may run on (e.g. dedicated GPU nodes).",
    )
    affinity: Affinity | None = Field(
        default=None, description="Replaces the operator's default (a store's replica spread)."
    )
    topology_spread_constraints: list[TopologySpreadConstraint] | None = Field(
        default=None,
        max_length=16,
        description="How the replicas spread over nodes or zones.",
    )
    priority_class_name: str | None = Field(
        default=None,
        max_length=253,
        pattern=SUBDOMAIN,
        description="PriorityClass of the pods: who is scheduled first and preempted last.",
    )
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None,
        max_length=16,
        json_schema_extra=map_list("name"),
        description="Secrets (type kubernetes.io/dockerconfigjson) with the credentials of a "
        "private registry the image is pulled from.",
    )
    volumes: list[Volume] | None = Field(
        default=None,
        max_length=LIST_MAX,
        json_schema_extra=map_list("name"),
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
