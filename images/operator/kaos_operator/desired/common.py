"""Pieces every kind's desired objects share: names, labels, owner references, ports.

Every object the operator creates carries the standard ``app.kubernetes.io/*`` labels
(``managed-by: kaos-operator`` is what the operator's own watches select on) and a
controller owner reference to its resource, so deleting the resource lets the garbage
collector delete the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaos_core.crds.common import CustomObject
from kaos_core.endpoints import Endpoint as Endpoint

FIELD_MANAGER = "kaos-operator"
MANAGED_BY = "kaos-operator"
MANAGED_BY_SELECTOR = f"app.kubernetes.io/managed-by={MANAGED_BY}"

# Ports of the services, fixed so an endpoint is known from a name alone.
AGENT_PORT = 8000
MEMORY_PORT = 8080
MCP_PORT = 8000
MCP_PATH = "/mcp"
LITELLM_PORT = 4000
OLLAMA_PORT = 11434

# The user our images run as (distroless "nonroot"); fsGroup makes volumes writable.
NONROOT_UID = 65532

Obj = dict[str, Any]


def service_url(name: str, namespace: str, port: int, path: str = "") -> str:
    return f"http://{name}.{namespace}.svc:{port}{path}"


def component_of(kind: str) -> str:
    return kind.lower()


def selector_labels(owner: CustomObject) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": component_of(owner.kind),
        "app.kubernetes.io/instance": owner.name,
    }


def labels(owner: CustomObject) -> dict[str, str]:
    return {
        **selector_labels(owner),
        "app.kubernetes.io/component": component_of(owner.kind),
        "app.kubernetes.io/part-of": "kaos",
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def owner_reference(owner: CustomObject) -> Obj:
    return {
        "apiVersion": owner.api_version,
        "kind": owner.kind,
        "name": owner.name,
        "uid": owner.metadata.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def metadata(owner: CustomObject, name: str | None = None) -> Obj:
    return {
        "name": name or owner.name,
        "namespace": owner.namespace,
        "labels": labels(owner),
        "ownerReferences": [owner_reference(owner)],
    }


def env_list(env: Mapping[str, str]) -> list[Obj]:
    return [{"name": k, "value": v} for k, v in env.items()]


def service(owner: CustomObject, port: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(owner),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(owner),
            "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def http_probe(path: str) -> Obj:
    return {"httpGet": {"path": path, "port": "http"}, "periodSeconds": 10}


# How long a container may take to answer its liveness probe the first time: a Python
# service imports its libraries for seconds, and on a busy node for tens of seconds; the
# liveness probe would restart it over and over before it ever listened.
STARTUP_SECONDS = 180
STARTUP_PERIOD_SECONDS = 2
# A liveness answer may take this long: an event loop busy with a burst answers late, and
# a restart then loses what it was doing (the default, one second, is shorter than a GC
# pause on a loaded node).
LIVENESS_TIMEOUT_SECONDS = 5


# The preStop sleep of a serving container: its endpoint leaves the Service (kube-proxy's
# rules on every node) before the process hears SIGTERM and stops listening; without it a
# new connection sent in between is refused (a memory write, a chat turn, lost).
PRE_STOP_SECONDS = 5


def pre_stop_sleep() -> Obj:
    """The preStop hook: the kubelet's own sleep action (nothing to run in the image)."""
    return {"preStop": {"sleep": {"seconds": PRE_STOP_SECONDS}}}


def startup_probe(liveness: Obj) -> Obj:
    """The liveness probe's request, tried every few seconds until it first succeeds
    (Kubernetes holds the liveness probe until then)."""
    probe = {k: v for k, v in liveness.items() if k not in ("periodSeconds", "timeoutSeconds")}
    return {
        **probe,
        "periodSeconds": STARTUP_PERIOD_SECONDS,
        "timeoutSeconds": LIVENESS_TIMEOUT_SECONDS,
        "failureThreshold": STARTUP_SECONDS // STARTUP_PERIOD_SECONDS,
    }


def restricted_security_context() -> Obj:
    """Pod Security "restricted" for the container: nothing to escalate, no capabilities."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
        "runAsUser": NONROOT_UID,
        "runAsGroup": NONROOT_UID,
    }


def deployment(
    owner: CustomObject,
    *,
    container: Obj,
    replicas: int,
    volumes: list[Obj] | None = None,
    strategy: str | Obj = "RollingUpdate",
    pod_annotations: Mapping[str, str] | None = None,
    pod_security: Obj | None = None,
    affinity: Obj | None = None,
    service_account: str | None = None,
    termination_grace_seconds: int | None = None,
) -> Obj:
    """``strategy``: a type (``RollingUpdate``, ``Recreate``) or a whole strategy object."""
    pod_spec: Obj = {"containers": [container]}
    if termination_grace_seconds is not None:
        pod_spec["terminationGracePeriodSeconds"] = termination_grace_seconds
    if service_account is not None:
        # Its own identity, and only the tokens the pod mounts explicitly.
        pod_spec["serviceAccountName"] = service_account
        pod_spec["automountServiceAccountToken"] = False
    if pod_security is not None:
        pod_spec["securityContext"] = pod_security
    if volumes:
        pod_spec["volumes"] = volumes
    if affinity is not None:
        pod_spec["affinity"] = affinity
    template_meta: Obj = {"labels": labels(owner)}
    if pod_annotations:
        template_meta["annotations"] = dict(pod_annotations)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(owner),
        "spec": {
            "replicas": replicas,
            "revisionHistoryLimit": 3,
            "selector": {"matchLabels": selector_labels(owner)},
            "strategy": {"type": strategy} if isinstance(strategy, str) else dict(strategy),
            "template": {"metadata": template_meta, "spec": pod_spec},
        },
    }


def container(
    name: str,
    image: str,
    pull_policy: str,
    *,
    port: int,
    env: list[Obj],
    command: list[str] | None = None,
    args: list[str] | None = None,
    resources: Mapping[str, Any] | None = None,
    readiness: Obj | None = None,
    liveness: Obj | None = None,
    volume_mounts: list[Obj] | None = None,
    security: Obj | None = None,
    lifecycle: Obj | None = None,
) -> Obj:
    out: Obj = {"name": name, "image": image, "imagePullPolicy": pull_policy}
    if command is not None:
        out["command"] = command
    if args is not None:
        out["args"] = args
    out["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    out["env"] = env
    if resources:
        out["resources"] = dict(resources)
    if readiness is not None:
        out["readinessProbe"] = readiness
    if liveness is not None:
        out["livenessProbe"] = {"timeoutSeconds": LIVENESS_TIMEOUT_SECONDS, **liveness}
        out["startupProbe"] = startup_probe(liveness)
    if volume_mounts:
        out["volumeMounts"] = volume_mounts
    if security is not None:
        out["securityContext"] = security
    if lifecycle is not None:
        out["lifecycle"] = lifecycle
    return out


def claim(owner: CustomObject, name: str, size: str, storage_class: str | None) -> Obj:
    """A ReadWriteOnce PersistentVolumeClaim owned by ``owner`` (no class: the default)."""
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(owner, name),
        "spec": spec,
    }


def disruption_budget(owner: CustomObject, budget: Mapping[str, int]) -> Obj:
    """A PodDisruptionBudget over the owner's pods; ``budget`` is its ``minAvailable`` or
    ``maxUnavailable``."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(owner),
        "spec": {**budget, "selector": {"matchLabels": selector_labels(owner)}},
    }


def bool_env(value: bool) -> str:
    return "true" if value else "false"
