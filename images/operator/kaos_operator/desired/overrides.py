"""A resource's ``container`` and ``pod`` merged over the operator's Deployment: one rule.

1. What the operator sets is its own: env names, ports, probes, security contexts, volume
   names, mount paths, pod labels and ``kaos.tools/`` annotations. Env names are its own
   also where it sets none today (each kind's ``reserved`` names: an agent's peers, MCP
   servers, memory endpoint and identity settings, a store's ``KAOS_MEMORY_*``, every
   ``OTEL_*``), so no spec can hand a pod a peer, a tool server or a posture the
   operator did not decide. An override that would
   change one is refused (``OverrideRefused``, naming every offending field) and nothing
   is applied: the resource reports it (Ready=False, ``OverrideRefused``, a Warning Event).
2. Lists the operator fills (env, volumeMounts, volumes) are extended: the override's
   entries come after the operator's.
3. Maps the operator fills (pod labels, annotations) gain the override's new keys.
4. What the operator sets only as a default is replaced: ``resources`` (so set it in one
   of spec.resources and container.resources), ``affinity`` (a store's replica spread).
5. What the operator leaves unset is taken as given: envFrom, nodeSelector, tolerations,
   topologySpreadConstraints, priorityClassName, imagePullSecrets.

Kubernetes resolves env over envFrom, so a Secret loaded with envFrom can never shadow an
operator variable either.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kaos_core.crds import reasons
from kaos_core.crds.overrides import ContainerOverride, EnvVar, PodOverride

from kaos_operator.desired.common import Obj

OPERATOR_ANNOTATION_PREFIX = "kaos.tools/"
# Tracing is the operator's (spec.telemetry over the chart's default) on every kind.
TELEMETRY_PREFIX = "OTEL_"

Reserved = Callable[[str], bool]


def reserved_prefixes(*prefixes: str, names: frozenset[str] = frozenset()) -> Reserved:
    """Names the operator keeps for itself: these, and any starting with a prefix."""
    return lambda name: name in names or name.startswith(prefixes)


TELEMETRY_ONLY = reserved_prefixes(TELEMETRY_PREFIX)


class SpecRefused(ValueError):
    """The operator will not run the resource as specified: Ready=False with ``reason``
    and ``message`` naming the fields, a Warning Event, nothing applied."""

    def __init__(self, reason: str, problems: Sequence[str]) -> None:
        self.reason = reason
        self.problems = list(problems)
        self.message = "; ".join(self.problems)
        super().__init__(self.message)


class OverrideRefused(SpecRefused):
    """The resource's overrides would change what the operator sets."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__(reasons.OVERRIDE_REFUSED, problems)


class Overridable(Protocol):
    """A spec with the override blocks (every kind's)."""

    @property
    def container(self) -> ContainerOverride | None: ...

    @property
    def pod(self) -> PodOverride | None: ...

    @property
    def resources(self) -> dict[str, Any] | None: ...


# Container fields the operator owns, with why (the override declares them only so an
# attempt is refused rather than pruned).
_OWNED_CONTAINER_FIELDS = {
    "ports": "the operator's ports are fixed",
    "liveness_probe": "the operator's probes are fixed",
    "readiness_probe": "the operator's probes are fixed",
    "startup_probe": "the operator's probes are fixed",
    "security_context": "the operator's security context is fixed",
}


def _wire(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def _container_refusals(
    main: Obj, override: ContainerOverride, env: Sequence[tuple[str, EnvVar]], reserved: Reserved
) -> list[str]:
    problems = [
        f"spec.container.{_camel(name)}: {why}"
        for name, why in _OWNED_CONTAINER_FIELDS.items()
        if getattr(override, name) is not None
    ]
    own_env = {e["name"] for e in main.get("env") or []}
    seen: set[str] = set()
    for where, var in env:
        if var.name in own_env:
            problems.append(f"{where}: {var.name} is set by the operator")
        elif reserved(var.name):
            problems.append(f"{where}: {var.name} is reserved for the operator")
        elif var.name in seen:
            problems.append(f"{where}: {var.name} is set twice")
        seen.add(var.name)
    own_paths = {m["mountPath"] for m in main.get("volumeMounts") or []}
    problems += [
        f"spec.container.volumeMounts: {m.mount_path} is mounted by the operator"
        for m in override.volume_mounts
        if m.mount_path in own_paths
    ]
    return problems


def _pod_refusals(template: Obj, override: PodOverride) -> list[str]:
    problems = []
    if override.security_context is not None:
        problems.append("spec.pod.securityContext: the operator's pod security context is fixed")
    own_labels = template["metadata"].get("labels") or {}
    problems += [
        f"spec.pod.labels: {key} is set by the operator"
        for key in override.labels or {}
        if key in own_labels
    ]
    own_annotations = template["metadata"].get("annotations") or {}
    problems += [
        f"spec.pod.annotations: {key} is reserved for the operator"
        for key in override.annotations or {}
        if key in own_annotations or key.startswith(OPERATOR_ANNOTATION_PREFIX)
    ]
    own_volumes = {v["name"] for v in template["spec"].get("volumes") or []}
    problems += [
        f"spec.pod.volumes: {v.name} is a volume of the operator"
        for v in override.volumes or []
        if v.name in own_volumes
    ]
    return problems


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def merge_overrides(
    dep: Obj,
    container: ContainerOverride | None,
    pod: PodOverride | None,
    *,
    spec_resources: bool = False,
    extra_env: tuple[str, Sequence[EnvVar]] = ("", ()),
    reserved: Reserved = TELEMETRY_ONLY,
) -> Obj:
    """``dep`` (the operator's Deployment) with the overrides merged in, by the rule above.

    ``extra_env`` is a kind's own env block (a ModelAPI's proxyConfig.env, with its field
    path), merged like container.env. Raises ``OverrideRefused``.
    """
    extra_where, extra_vars = extra_env
    if container is None and pod is None and not extra_vars:
        return dep
    out = copy.deepcopy(dep)
    template = out["spec"]["template"]
    pod_spec = template["spec"]
    main = pod_spec["containers"][0]
    c = container or ContainerOverride()
    env = [(extra_where, v) for v in extra_vars]
    env += [("spec.container.env", v) for v in c.env]
    problems = _container_refusals(main, c, env, reserved)
    if c.resources is not None and spec_resources:
        problems.append("spec.container.resources: spec.resources is set too; set one")
    if pod is not None:
        problems += _pod_refusals(template, pod)
    if problems:
        raise OverrideRefused(problems)

    if env:
        main["env"] = [*(main.get("env") or []), *(_wire(v) for _, v in env)]
    if c.env_from:
        main["envFrom"] = [_wire(e) for e in c.env_from]
    if c.resources is not None:
        main["resources"] = _wire(c.resources)
    if c.volume_mounts:
        main["volumeMounts"] = [*(main.get("volumeMounts") or []), *map(_wire, c.volume_mounts)]
    if pod is not None:
        _merge_pod(template, pod)
    return out


def _merge_pod(template: Obj, pod: PodOverride) -> None:
    meta, spec = template["metadata"], template["spec"]
    if pod.labels:
        meta["labels"] = {**meta.get("labels", {}), **pod.labels}
    if pod.annotations:
        meta["annotations"] = {**meta.get("annotations", {}), **pod.annotations}
    _merge_placement(spec, pod)
    if pod.volumes:
        spec["volumes"] = [*(spec.get("volumes") or []), *map(_wire, pod.volumes)]


def with_placement(pod_spec: Obj, pod: PodOverride | None) -> Obj:
    """A pod the operator runs beside a resource's workload (an Agent's schedule runs)
    with the override's placement and pulling: where the pods may run (node selector,
    tolerations, affinity, spread, priority) and the image pull secrets, so they start
    wherever the workload's pods can. Not its labels, annotations or volumes: those are
    the workload's pods' own."""
    if pod is None:
        return pod_spec
    out = copy.deepcopy(pod_spec)
    _merge_placement(out, pod)
    return out


def _merge_placement(spec: Obj, pod: PodOverride) -> None:
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.tolerations:
        spec["tolerations"] = [_wire(t) for t in pod.tolerations]
    if pod.affinity is not None:
        spec["affinity"] = _wire(pod.affinity)
    if pod.topology_spread_constraints:
        spec["topologySpreadConstraints"] = [_wire(t) for t in pod.topology_spread_constraints]
    if pod.priority_class_name:
        spec["priorityClassName"] = pod.priority_class_name
    if pod.image_pull_secrets:
        spec["imagePullSecrets"] = [_wire(r) for r in pod.image_pull_secrets]


def with_overrides(dep: Obj, spec: Overridable, **kwargs: Any) -> Obj:
    """``merge_overrides`` with a spec's own blocks."""
    return merge_overrides(
        dep, spec.container, spec.pod, spec_resources=spec.resources is not None, **kwargs
    )
