"""Why a resource's Deployment is not available, in the words of its pods and claims (pure).

A Deployment that does not become available says only that it is progressing; the cause
is on its pods (an image that cannot be pulled, a container that crash-loops, a Secret
it names that does not exist, no node that fits), on a claim that stays Pending, or on
the ReplicaSet that cannot create pods. ``diagnose`` reads those objects as the API server
returns them and names the first cause it finds, most final first; the reconciler puts it
into the resource's Ready condition and ``status.message`` instead of the generic
"waiting for the deployment". The reads themselves happen only while the Deployment is
not available (``reconcilers.base``), so a healthy cluster costs no request.

The two causes no waiting resolves (an image that is not there, a container that exits)
are ``stuck``: the resource's phase becomes Failed, so ``kaos ... --wait`` stops at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kaos_core.crds import reasons

Obj = dict[str, Any]

# Waiting reasons of a container whose image cannot be had (the kubelet's own names).
IMAGE_PULL_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
)
# Waiting reasons of a container the kubelet cannot create from its spec (a Secret,
# ConfigMap or key it names is missing, say).
CONFIG_REASONS = frozenset({"CreateContainerConfigError", "CreateContainerError"})
# A claim waiting for its pod to be scheduled is not the cause of anything.
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
# Messages are the cluster's and can be long (a scheduler's per-node list, a container's
# termination message): kept to what a condition shows in one screen.
MESSAGE_MAX = 600


@dataclass(frozen=True)
class WorkloadProblem:
    """One cause, as a Ready condition carries it."""

    reason: str
    message: str
    # No waiting resolves it: a spec (or the registry) has to change.
    stuck: bool = False


# The order ``diagnose`` prefers causes in, the most final first: a pod that cannot pull
# its image is also not ready, and a claim that is Pending also leaves its pod unscheduled.
RANK = (
    reasons.IMAGE_PULL_FAILED,
    reasons.CRASH_LOOPING,
    reasons.CONTAINER_CONFIG_ERROR,
    reasons.CLAIM_PENDING,
    reasons.UNSCHEDULABLE,
    reasons.POD_CREATION_FAILED,
)


def pod_selector(deployment: Obj) -> str | None:
    """The label selector of the Deployment's pods, as a ``labelSelector`` query."""
    labels = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
    if not labels:
        return None
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def claims_of(deployment: Obj) -> list[str]:
    """Names of the PersistentVolumeClaims the Deployment's pods mount."""
    template = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    names = []
    for volume in template.get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            names.append(str(claim))
    return names


def observed(deployment: Obj) -> bool:
    """Whether the Deployment's controller has seen its current spec: before that its pods
    (none yet, or the previous template's) say nothing about it."""
    meta = deployment.get("metadata") or {}
    seen = (deployment.get("status") or {}).get("observedGeneration")
    return seen is not None and int(seen) >= int(meta.get("generation") or 1)


def diagnosis_due(deployment: Obj, last_read: float | None, now: float, interval: float) -> bool:
    """Whether to read the pods of a Deployment that is not available now (``now`` and
    ``last_read`` in seconds on one clock; ``last_read`` None: not read for this
    generation). Once its controller has seen it, and at most once per ``interval``:
    while many Deployments roll out each changes several times a second, and every
    change reconciles its resource, which must not cost a list of pods each time."""
    if not observed(deployment):
        return False
    return last_read is None or now - last_read >= interval


def pending_claims(claims: Mapping[str, Obj | None]) -> list[str]:
    """Claims whose phase is Pending (their Events say why); unknown claims are left out."""
    return [
        name
        for name, claim in claims.items()
        if claim is not None and (claim.get("status") or {}).get("phase") == "Pending"
    ]


def diagnose(
    deployment: Obj,
    pods: Sequence[Obj],
    claims: Mapping[str, Obj | None],
    claim_events: Mapping[str, Sequence[Obj]],
    *,
    storage_field: str | None = None,
) -> WorkloadProblem | None:
    """The cause a Deployment that is not available is waiting on, or None when nothing
    says (a rollout in progress, a container that runs but is not ready yet).

    ``pods`` are the Deployment's pods, ``claims`` the claims it mounts (None: not known),
    ``claim_events`` the Events of the Pending ones; ``storage_field`` is where the
    resource's spec names the claim's storage class (the hint of ClaimPending).
    """
    found: list[WorkloadProblem] = []
    for pod in sorted(pods, key=_name):
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        found += _container_problems(pod)
        scheduling = _unschedulable(pod)
        if scheduling is not None:
            found.append(scheduling)
    for name in pending_claims(claims):
        problem = _claim_problem(name, claim_events.get(name) or (), storage_field)
        if problem is not None:
            found.append(problem)
    refused = _replica_failure(deployment)
    if refused is not None:
        found.append(refused)
    if not found:
        return None
    return min(found, key=lambda p: RANK.index(p.reason))


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 1] + "…"


def _container_problems(pod: Obj) -> list[WorkloadProblem]:
    status = pod.get("status") or {}
    out = []
    statuses = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    for cs in statuses:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        why = str(waiting.get("reason") or "")
        said = str(waiting.get("message") or "")
        container = cs.get("name", "")
        if why in IMAGE_PULL_REASONS:
            image = cs.get("image") or _spec_image(pod, container)
            cause = _pull_cause(why, said)
            out.append(
                WorkloadProblem(
                    reasons.IMAGE_PULL_FAILED,
                    _clip(
                        f"container {container} cannot pull image {image}"
                        + (f": {cause}" if cause else f" ({why})")
                        + "; check the image name (spec.image) and, for a private registry,"
                        " pod.imagePullSecrets"
                    ),
                    stuck=True,
                )
            )
        elif why == "CrashLoopBackOff":
            out.append(_crash_loop(pod, container, cs))
        elif why in CONFIG_REASONS:
            out.append(
                WorkloadProblem(
                    reasons.CONTAINER_CONFIG_ERROR,
                    _clip(
                        f"container {container} cannot be created ({why}"
                        + (f": {said}" if said else "")
                        + "); create what it names or correct the reference"
                    ),
                )
            )
    return out


def _spec_image(pod: Obj, container: str) -> str:
    spec = pod.get("spec") or {}
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        if c.get("name") == container:
            return str(c.get("image", ""))
    return ""


def _pull_cause(why: str, said: str) -> str:
    """The registry's answer, the same whichever of its two states the kubelet is in: it
    alternates ErrImagePull (the answer) and ImagePullBackOff ("Back-off pulling image
    "x": ErrImagePull: " before the same answer, or nothing)."""
    if why != "ImagePullBackOff":
        return said
    _, sep, cause = said.partition(": ErrImagePull: ")
    return cause if sep else ""


def _crash_loop(pod_obj: Obj, container: str, cs: Obj) -> WorkloadProblem:
    meta = pod_obj.get("metadata") or {}
    pod, namespace = _name(pod_obj), meta.get("namespace")
    last = (cs.get("lastState") or {}).get("terminated") or {}
    parts = [f"container {container} of pod {pod} keeps exiting (CrashLoopBackOff)"]
    if last:
        code, why = last.get("exitCode"), last.get("reason")
        exit_text = f"last exit code {code}" + (f" ({why})" if why else "")
        said = str(last.get("message") or "").strip()
        parts.append(exit_text + (f": {said}" if said else ""))
        if why == "OOMKilled":
            parts.append("it ran out of memory: raise resources.limits.memory")
    where = f" -n {namespace}" if namespace else ""
    parts.append(f"its log: kubectl logs{where} {pod} -c {container} --previous")
    return WorkloadProblem(reasons.CRASH_LOOPING, _clip("; ".join(parts)), stuck=True)


def _unschedulable(pod: Obj) -> WorkloadProblem | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (
            cond.get("type") == "PodScheduled"
            and cond.get("status") == "False"
            and cond.get("reason") == "Unschedulable"
        ):
            said = str(cond.get("message") or "no node fits it")
            return WorkloadProblem(
                reasons.UNSCHEDULABLE, _clip(f"pod {_name(pod)} cannot be scheduled: {said}")
            )
    return None


def _latest(events: Sequence[Obj]) -> Obj | None:
    def when(event: Obj) -> str:
        series = event.get("series") or {}
        return str(
            series.get("lastObservedTime")
            or event.get("lastTimestamp")
            or event.get("eventTime")
            or (event.get("metadata") or {}).get("creationTimestamp")
            or ""
        )

    return max(events, key=when, default=None)


def _claim_problem(
    name: str, events: Sequence[Obj], storage_field: str | None
) -> WorkloadProblem | None:
    event = _latest(events)
    if event is not None and event.get("reason") == WAIT_FOR_FIRST_CONSUMER:
        return None  # bound once its pod is scheduled: the pod's state is the cause
    said = str((event or {}).get("message") or "not bound to a volume yet")
    where = f"set {storage_field} to" if storage_field else "give it"
    return WorkloadProblem(
        reasons.CLAIM_PENDING,
        _clip(
            f"PersistentVolumeClaim {name} is Pending: {said}; {where} a StorageClass whose"
            " provisioner makes volumes, or create a PersistentVolume it can bind"
        ),
    )


def _replica_failure(deployment: Obj) -> WorkloadProblem | None:
    for cond in (deployment.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "ReplicaFailure" and cond.get("status") == "True":
            said = str(cond.get("message") or cond.get("reason") or "")
            return WorkloadProblem(
                reasons.POD_CREATION_FAILED, _clip(f"the Deployment cannot create pods: {said}")
            )
    return None
