"""Why a Deployment is not available, read from its pods, claims and the claims' Events.

The objects are the API server's (``data/workload/``: captured from the test cluster and
its real node, see ``test_objects_captured_from_clusters``); the reconciler's part,
reading them only while the Deployment is not available and putting the cause into the
Ready condition, is tested against a fake reader below.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kaos_core.crds import reasons
from kaos_operator.reconcilers import build_reconcilers
from kaos_operator.reconcilers.base import workload_recheck_delay
from kaos_operator.workload import (
    MESSAGE_MAX,
    WorkloadProblem,
    claims_of,
    diagnose,
    diagnosis_due,
    observed,
    pending_claims,
    pod_selector,
)

from tests.support.operator_context import FakeContext, raw, ready_model_api, store_spec

DATA = Path(__file__).parent / "data" / "workload"


def load(name: str) -> Any:
    return json.loads((DATA / f"{name}.json").read_text())


def deployment(claim: str | None = None, conditions: list[dict[str, Any]] | None = None) -> Any:
    volumes = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}] if claim else []
    return {
        "metadata": {"name": "mem", "namespace": "ns", "generation": 1},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/instance": "mem", "kaos.tools/k": "m"}},
            "template": {"spec": {"containers": [{"name": "memory"}], "volumes": volumes}},
        },
        "status": {"observedGeneration": 1, "conditions": conditions or []},
    }


def pod(name: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"containers": [{"name": "agent", "image": "registry.example/agent:9"}]},
        "status": {"phase": "Pending", **status},
    }


def waiting(reason: str, message: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "name": "agent",
        "image": "registry.example/agent:9",
        "ready": False,
        "restartCount": extra.pop("restarts", 0),
        "state": {"waiting": {"reason": reason, **({"message": message} if message else {})}},
        **extra,
    }


def claim(phase: str) -> dict[str, Any]:
    return {"metadata": {"name": "mem-data", "namespace": "ns"}, "status": {"phase": phase}}


def event(reason: str, message: str, when: str) -> dict[str, Any]:
    return {"reason": reason, "message": message, "type": "Warning", "lastTimestamp": when}


UNBOUND = "no persistent volumes available for this claim and no storage class is set"


# -- the pure function ----------------------------------------------------------------------


def test_selector_and_claims_come_from_the_deployment() -> None:
    dep = deployment("mem-data")
    assert pod_selector(dep) == "app.kubernetes.io/instance=mem,kaos.tools/k=m"
    assert claims_of(dep) == ["mem-data"]
    assert pod_selector({"spec": {}}) is None
    assert pending_claims({"a": claim("Pending"), "b": claim("Bound"), "c": None}) == ["a"]


def test_a_pending_claim_is_named_with_its_event_and_what_to_set() -> None:
    events = {
        "mem-data": [
            event("FailedBinding", "an older message", "2026-01-01T00:00:01Z"),
            event("FailedBinding", UNBOUND, "2026-01-01T00:00:09Z"),
        ]
    }
    problem = diagnose(
        deployment("mem-data"),
        [],
        {"mem-data": claim("Pending")},
        events,
        storage_field="spec.storage.storageClassName",
    )
    assert problem == WorkloadProblem(
        reasons.CLAIM_PENDING,
        f"PersistentVolumeClaim mem-data is Pending: {UNBOUND}; set"
        " spec.storage.storageClassName to a StorageClass whose provisioner makes volumes, or"
        " create a PersistentVolume it can bind",
        stuck=False,
    )


def test_a_claim_waiting_for_its_pod_is_not_the_cause() -> None:
    unscheduled = pod(
        "mem-1",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node "
                "affinity/selector.",
            }
        ],
    )
    events = {
        "mem-data": [
            event(
                "WaitForFirstConsumer",
                "waiting for first consumer to be created before binding",
                "2026-01-01T00:00:01Z",
            )
        ]
    }
    problem = diagnose(
        deployment("mem-data"), [unscheduled], {"mem-data": claim("Pending")}, events
    )
    assert problem is not None
    assert problem.reason == reasons.UNSCHEDULABLE
    assert problem.message == (
        "pod mem-1 cannot be scheduled: 0/2 nodes are available: 2 node(s) didn't match Pod's"
        " node affinity/selector."
    )
    assert not problem.stuck


def test_a_pending_claim_wins_over_the_unschedulable_pod_it_causes() -> None:
    unscheduled = pod(
        "mem-1",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available: pod has unbound immediate "
                "PersistentVolumeClaims.",
            }
        ],
    )
    problem = diagnose(deployment("mem-data"), [unscheduled], {"mem-data": claim("Pending")}, {})
    assert problem is not None
    assert problem.reason == reasons.CLAIM_PENDING
    # No Event (yet): the claim's state, still with what to do.
    assert problem.message.startswith(
        "PersistentVolumeClaim mem-data is Pending: not bound to a volume yet; give it a "
        "StorageClass"
    )


ANSWER = 'failed to pull and unpack image "registry.example/agent:9": not found'


@pytest.mark.parametrize(
    ("why", "said"),
    [
        ("ErrImagePull", ANSWER),
        # The kubelet's other state carries the same answer after a prefix of its own.
        (
            "ImagePullBackOff",
            f'Back-off pulling image "registry.example/agent:9": ErrImagePull: {ANSWER}',
        ),
    ],
)
def test_an_image_that_cannot_be_pulled_is_stuck_with_the_registry_answer(
    why: str, said: str
) -> None:
    problem = diagnose(deployment(), [pod("a-1", containerStatuses=[waiting(why, said)])], {}, {})
    assert problem == WorkloadProblem(
        reasons.IMAGE_PULL_FAILED,
        f"container agent cannot pull image registry.example/agent:9: {ANSWER}; check the"
        " image name (spec.image) and, for a private registry, pod.imagePullSecrets",
        stuck=True,
    )


def test_a_backoff_without_the_answer_names_the_state_and_the_spec_image() -> None:
    status = waiting("ImagePullBackOff", 'Back-off pulling image "registry.example/agent:9"')
    status["image"] = ""  # not resolved yet: the image is the pod spec's
    problem = diagnose(deployment(), [pod("a-1", containerStatuses=[status])], {}, {})
    assert problem == WorkloadProblem(
        reasons.IMAGE_PULL_FAILED,
        "container agent cannot pull image registry.example/agent:9 (ImagePullBackOff); check"
        " the image name (spec.image) and, for a private registry, pod.imagePullSecrets",
        stuck=True,
    )


def test_a_crash_loop_names_the_last_exit_and_the_log_command() -> None:
    status = waiting(
        "CrashLoopBackOff",
        "back-off 40s restarting failed container=agent pod=a-1",
        restarts=4,
        lastState={"terminated": {"exitCode": 2, "reason": "Error", "message": ""}},
    )
    problem = diagnose(deployment(), [pod("a-1", containerStatuses=[status])], {}, {})
    assert problem == WorkloadProblem(
        reasons.CRASH_LOOPING,
        "container agent of pod a-1 keeps exiting (CrashLoopBackOff); last exit code 2"
        " (Error); its log: kubectl logs -n ns a-1 -c agent --previous",
        stuck=True,
    )


def test_an_out_of_memory_crash_says_which_limit_to_raise() -> None:
    status = waiting(
        "CrashLoopBackOff",
        restarts=2,
        lastState={"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
    )
    problem = diagnose(deployment(), [pod("a-1", containerStatuses=[status])], {}, {})
    assert problem is not None
    assert "last exit code 137 (OOMKilled); it ran out of memory: raise resources.limits" in (
        problem.message
    )


def test_a_missing_secret_is_named_and_not_stuck() -> None:
    status = waiting("CreateContainerConfigError", 'secret "pg-dsn" not found')
    problem = diagnose(deployment(), [pod("m-1", containerStatuses=[status])], {}, {})
    assert problem == WorkloadProblem(
        reasons.CONTAINER_CONFIG_ERROR,
        'container agent cannot be created (CreateContainerConfigError: secret "pg-dsn" not'
        " found); create what it names or correct the reference",
    )


def test_pods_the_replicaset_cannot_create_are_reported() -> None:
    refused = {
        "type": "ReplicaFailure",
        "status": "True",
        "reason": "FailedCreate",
        "message": 'pods "a-1" is forbidden: exceeded quota: small, requested: pods=1',
    }
    problem = diagnose(deployment(conditions=[refused]), [], {}, {})
    assert problem == WorkloadProblem(
        reasons.POD_CREATION_FAILED,
        'the Deployment cannot create pods: pods "a-1" is forbidden: exceeded quota: small,'
        " requested: pods=1",
    )


def test_the_most_final_cause_wins_across_pods_and_init_containers() -> None:
    config = pod("a-1", containerStatuses=[waiting("CreateContainerConfigError", "x")])
    pulling = pod("a-2", initContainerStatuses=[waiting("ImagePullBackOff", "y")])
    problem = diagnose(deployment(), [config, pulling], {}, {})
    assert problem is not None
    assert problem.reason == reasons.IMAGE_PULL_FAILED


def test_a_rollout_in_progress_has_no_named_cause() -> None:
    creating = pod("a-1", containerStatuses=[waiting("ContainerCreating")])
    running = pod("a-2", phase="Running", containerStatuses=[{"name": "agent", "ready": False}])
    terminating = pod("a-0", containerStatuses=[waiting("ImagePullBackOff")])
    terminating["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert diagnose(deployment(), [creating, running, terminating], {}, {}) is None


def test_long_messages_are_clipped_to_one_line() -> None:
    said = "0/500 nodes are available:\n" + "x " * 2000
    unscheduled = pod(
        "a-1",
        conditions=[
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": said}
        ],
    )
    problem = diagnose(deployment(), [unscheduled], {}, {})
    assert problem is not None
    assert len(problem.message) == MESSAGE_MAX
    assert "\n" not in problem.message
    assert problem.message.endswith("…")


PULL_ANSWER = (
    "cannot pull image registry.invalid/kaos/kaos-agent:1: failed to pull and unpack image"
    ' "registry.invalid/kaos/kaos-agent:1": failed to resolve image'
)


@pytest.mark.parametrize(
    ("fixture", "reason", "stuck", "words"),
    [
        ("claim_pending", reasons.CLAIM_PENDING, False, f"memory-local-data is Pending: {UNBOUND}"),
        (
            "unschedulable",
            reasons.UNSCHEDULABLE,
            False,
            "cannot be scheduled: 0/2 nodes are available: 2 node(s) didn't match Pod's node"
            " affinity/selector.",
        ),
        ("image_pull", reasons.IMAGE_PULL_FAILED, True, PULL_ANSWER),
        ("image_pull_backoff", reasons.IMAGE_PULL_FAILED, True, PULL_ANSWER),
        (
            "crash_loop",
            reasons.CRASH_LOOPING,
            True,
            "last exit code 128 (StartError): failed to create containerd task: failed to create"
            " shim task: OCI runtime create failed: runc create failed: unable to start"
            ' container process: exec: "kaos-agent": executable file not found in $PATH',
        ),
    ],
)
def test_objects_captured_from_clusters(fixture: str, reason: str, stuck: bool, words: str) -> None:
    """Objects as the API server returned them (``data/workload/<name>.json``: the
    Deployment, its pods, its claims and their Events, ``managedFields`` left out). The
    claim and the scheduling case come from the test cluster (kwok nodes: an operator-made
    MemoryStore with no StorageClass, an Agent with a node selector no node has); the image
    and crash cases from its real node (an Agent whose spec.image is on no registry, one
    whose image lacks kaos-agent)."""
    case = load(fixture)
    problem = diagnose(
        case["deployment"],
        case["pods"],
        case["claims"],
        case["events"],
        storage_field="spec.storage.storageClassName",
    )
    assert problem is not None
    assert (problem.reason, problem.stuck) == (reason, stuck)
    assert words in problem.message


# -- the reconciler -------------------------------------------------------------------------


class FakeReader:
    """The controller's reads, over dictionaries; counts the requests."""

    def __init__(self) -> None:
        self.pod_list: list[dict[str, Any]] = []
        self.events: dict[str, list[dict[str, Any]]] = {}
        self.calls: list[tuple[str, ...]] = []

    async def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        self.calls.append(("pods", namespace, selector))
        return copy.deepcopy(self.pod_list)

    async def events_about(self, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
        self.calls.append(("events", namespace, kind, name))
        return copy.deepcopy(self.events.get(name, []))


def ready(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == reasons.READY)


def fixed_clock() -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC)


def rolling_out(namespace: str, name: str, ctx: FakeContext) -> None:
    """The applied Deployment seen by its controller, not available yet."""
    dep = ctx.objects[("Deployment", namespace, name)]
    dep["metadata"]["generation"] = 1
    dep["status"] = {"observedGeneration": 1, "replicas": 1, "unavailableReplicas": 1}


def test_pods_are_read_once_the_controller_saw_the_spec_and_then_at_most_every_interval() -> None:
    new = {"metadata": {"generation": 2}, "status": {"observedGeneration": 1}}
    seen = {"metadata": {"generation": 2}, "status": {"observedGeneration": 2}}
    assert not observed({"metadata": {"generation": 1}})
    assert not observed(new)
    assert observed(seen)
    assert not diagnosis_due(new, None, 100.0, 5.0)
    assert diagnosis_due(seen, None, 100.0, 5.0)
    assert not diagnosis_due(seen, 97.0, 100.0, 5.0)
    assert diagnosis_due(seen, 95.0, 100.0, 5.0)


async def test_a_store_with_an_unbound_claim_says_so_and_reads_only_while_unavailable() -> None:
    ctx, reader = FakeContext(), FakeReader()
    ready_model_api(ctx)
    ctx.add(raw("MemoryStore", "mem", store_spec()))
    rec = build_reconcilers(ctx, clock=fixed_clock, workload_reader=reader)["MemoryStore"]

    await rec.reconcile("ns", "mem")  # applies the Deployment and the claim
    assert reader.calls == []  # its controller has not seen it yet: its pods say nothing
    rolling_out("ns", "mem", ctx)
    ctx.objects[("PersistentVolumeClaim", "ns", "mem-data")]["status"] = {"phase": "Pending"}
    reader.events["mem-data"] = [event("FailedBinding", UNBOUND, "2026-01-01T00:00:00Z")]
    reader.calls.clear()
    await rec.reconcile("ns", "mem")

    status = ctx.status_of("MemoryStore", "ns", "mem")
    assert ready(status)["reason"] == reasons.CLAIM_PENDING
    assert UNBOUND in ready(status)["message"]
    assert "spec.storage.storageClassName" in status["message"]
    assert status["phase"] == reasons.PHASE_PENDING
    selector = pod_selector(ctx.objects[("Deployment", "ns", "mem")])
    assert reader.calls == [
        ("pods", "ns", selector),
        ("events", "ns", "PersistentVolumeClaim", "mem-data"),
    ]
    # Looked at again while unavailable, later each time, without waiting for an event.
    assert rec.take_recheck("ns", "mem") == workload_recheck_delay(2) == 10.0
    # Looked at again at once (another change of the Deployment): what was read is reused.
    reader.calls.clear()
    await rec.reconcile("ns", "mem")
    assert reader.calls == []
    assert ready(ctx.status_of("MemoryStore", "ns", "mem"))["reason"] == reasons.CLAIM_PENDING
    assert rec.take_recheck("ns", "mem") == workload_recheck_delay(3)

    ctx.deployment_available("ns", "mem")
    reader.calls.clear()
    await rec.reconcile("ns", "mem")
    status = ctx.status_of("MemoryStore", "ns", "mem")
    assert ready(status)["reason"] == reasons.AVAILABLE
    assert "message" not in status
    assert reader.calls == []  # an available Deployment costs no read
    assert rec.take_recheck("ns", "mem") is None


async def test_an_agent_whose_image_cannot_be_pulled_fails_with_an_event() -> None:
    ctx, reader = FakeContext(), FakeReader()
    ready_model_api(ctx)
    ctx.add(raw("Agent", "bot", {"modelAPI": "llm", "image": "registry.example/agent:9"}))
    rec = build_reconcilers(ctx, clock=fixed_clock, workload_reader=reader)["Agent"]
    reader.pod_list = [pod("bot-1", containerStatuses=[waiting("ImagePullBackOff", "nope")])]
    await rec.reconcile("ns", "bot")
    rolling_out("ns", "bot", ctx)

    await rec.reconcile("ns", "bot")

    status = ctx.status_of("Agent", "ns", "bot")
    assert ready(status)["reason"] == reasons.IMAGE_PULL_FAILED
    assert status["phase"] == reasons.PHASE_FAILED
    assert status["message"] == ready(status)["message"]
    assert [(e.type_, e.reason) for e in ctx.events][-1] == ("Warning", reasons.IMAGE_PULL_FAILED)
    assert rec.take_recheck("ns", "bot") == workload_recheck_delay(2)


async def test_unreadable_pods_leave_the_generic_state() -> None:
    from kaos_operator.kube import PermanentError

    class Forbidden(FakeReader):
        async def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
            raise PermanentError(403, "Forbidden", "pods is forbidden")

    ctx = FakeContext()
    ready_model_api(ctx)
    ctx.add(raw("Agent", "bot", {"modelAPI": "llm"}))
    rec = build_reconcilers(ctx, workload_reader=Forbidden())["Agent"]

    await rec.reconcile("ns", "bot")

    status = ctx.status_of("Agent", "ns", "bot")
    assert ready(status)["reason"] == reasons.DEPLOYMENT_PROGRESSING
    assert status["phase"] == reasons.PHASE_PENDING


def test_rechecks_back_off_to_a_minute() -> None:
    assert [workload_recheck_delay(n) for n in range(1, 7)] == [5, 10, 20, 40, 60, 60]
