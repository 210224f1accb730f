"""A resource whose Deployment cannot become available says why, in its Ready condition.

Against the test cluster (a real API server, scheduler and controllers; kwok plays the
kubelet): a local MemoryStore whose claim cannot bind reports ClaimPending with the
PersistentVolume controller's Event, and becomes Ready once a volume appears; an Agent no
node fits reports Unschedulable with the scheduler's reasons; an Agent whose container
crash-loops, as a kubelet reports it, fails with CrashLooping and a Warning Event. All
three are found by the operator looking again while the Deployment is unavailable: none
of those changes touches the Deployment itself. Run as the chart's ServiceAccount with only
the chart's RBAC, the operator still reads what it needs to name the cause.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaos_core.crds import reasons
from kaos_operator.kube import EVENTS, KubeClient, Obj, ResourceType

from tests.e2e.operator.helpers import (
    AGENTS,
    MEMORYSTORES,
    condition,
    create,
    eventually,
    phase,
    proxy_api,
    store_spec,
    volume_for,
    wait_phase,
)
from tests.fixtures.helm import Helm
from tests.fixtures.operator import OperatorFactory
from tests.support.cluster import Cluster
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

PODS = ResourceType("", "v1", "pods", "Pod")
UNBOUND = "no persistent volumes available for this claim and no storage class is set"


async def ready_reason(kube: KubeClient, rt: ResourceType, ns: str, name: str, want: str) -> Obj:
    async def probe() -> Obj | None:
        obj = await kube.get(rt, ns, name)
        ready = condition(obj, reasons.READY) or {}
        return obj if ready.get("reason") == want else None

    return await eventually(probe, within=90, what=f"{name} Ready reason {want}")


async def test_a_store_whose_claim_cannot_bind_says_so_until_a_volume_comes(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    # The test cluster has no StorageClass and no provisioner: the claim stays Pending.
    await create(kube, ns, "MemoryStore", "mem", store_spec())

    store = await ready_reason(kube, MEMORYSTORES, ns, "mem", reasons.CLAIM_PENDING)

    ready = condition(store, reasons.READY) or {}
    assert ready["status"] == "False"
    assert ready["message"] == (
        f"PersistentVolumeClaim mem-data is Pending: {UNBOUND}; set "
        "spec.storage.storageClassName to a StorageClass whose provisioner makes volumes, or "
        "create a PersistentVolume it can bind"
    )
    assert store["status"]["message"] == ready["message"]
    assert phase(store) == reasons.PHASE_PENDING  # a provisioner may yet come

    await volume_for(kube, ns, "mem-data")
    store = await wait_phase(kube, ns, "MemoryStore", "mem", reasons.PHASE_READY, within=90)
    assert (condition(store, reasons.READY) or {})["reason"] == reasons.AVAILABLE
    assert "message" not in store["status"]


async def test_an_agent_no_node_fits_says_why(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await wait_phase(kube, ns, "ModelAPI", "llm", reasons.PHASE_READY)
    await create(
        kube,
        ns,
        "Agent",
        "bot",
        {"modelAPI": "llm", "pod": {"nodeSelector": {"kaos.tools/pool": "gpu"}}},
    )

    agent = await ready_reason(kube, AGENTS, ns, "bot", reasons.UNSCHEDULABLE)

    message = (condition(agent, reasons.READY) or {})["message"]
    assert message.startswith("pod bot-")
    assert (
        " cannot be scheduled: 0/2 nodes are available: 2 node(s) didn't match Pod's node"
        " affinity/selector." in message
    )
    assert phase(agent) == reasons.PHASE_PENDING


def crash_looping(pod: Obj) -> dict[str, Any]:
    """The status a kubelet reports for a pod whose only container keeps exiting 3."""
    when = pod["status"].get("startTime")
    container = pod["spec"]["containers"][0]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"]},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": s, "lastTransitionTime": when}
                for t, s in (
                    ("PodScheduled", "True"),
                    ("Initialized", "True"),
                    ("ContainersReady", "False"),
                    ("Ready", "False"),
                )
            ],
            "containerStatuses": [
                {
                    "name": container["name"],
                    "image": container["image"],
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 5,
                    "state": {
                        "waiting": {
                            "reason": "CrashLoopBackOff",
                            "message": "back-off 2m40s restarting failed container",
                        }
                    },
                    "lastState": {
                        "terminated": {
                            "exitCode": 3,
                            "reason": "Error",
                            "startedAt": when,
                            "finishedAt": when,
                        }
                    },
                }
            ],
        },
    }


async def test_an_agent_whose_container_crash_loops_fails_with_the_exit_and_an_event(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(kube, ns, "Agent", "bot", {"modelAPI": "llm"})
    await wait_phase(kube, ns, "Agent", "bot", reasons.PHASE_READY, within=90)
    pods = (
        await kube.list(
            PODS, ns, label_selector="app.kubernetes.io/name=agent,app.kubernetes.io/instance=bot"
        )
    )["items"]
    assert len(pods) == 1
    pod = pods[0]
    name = pod["metadata"]["name"]

    # kwok plays the kubelet and leaves a Running pod alone: the kubelet's report of a
    # crash loop is written as a kubelet would.
    await kube.apply(crash_looping(pod), rt=PODS, sub="status")

    agent = await ready_reason(kube, AGENTS, ns, "bot", reasons.CRASH_LOOPING)
    ready = condition(agent, reasons.READY) or {}
    assert ready["message"] == (
        f"container agent of pod {name} keeps exiting (CrashLoopBackOff); last exit code 3 "
        f"(Error); its log: kubectl logs -n {ns} {name} -c agent --previous"
    )
    assert phase(agent) == reasons.PHASE_FAILED  # no waiting resolves it

    async def warning() -> list[Obj] | None:
        doc = await kube.list(EVENTS, ns)
        found = [
            e
            for e in doc.get("items", [])
            if e.get("involvedObject", {}).get("name") == "bot"
            and e.get("reason") == reasons.CRASH_LOOPING
        ]
        return found or None

    events = await eventually(warning, within=30, what="a CrashLooping Event on the Agent")
    assert events[0]["type"] == "Warning"
    assert events[0]["message"] == f"Failed: {ready['message']}"


RBAC_KINDS = {"ServiceAccount", "ClusterRole", "Role", "RoleBinding", "ClusterRoleBinding"}


@pytest.fixture
def chart_rbac(k8s_cluster: Cluster, k8s_namespace: str, helm: Helm) -> Iterator[str]:
    """The chart's operator RBAC for the test namespace (operator.watchNamespace), under a
    release of its own; the ServiceAccount's name. Cluster-scoped objects are deleted after."""
    release = f"r{uuid.uuid4().hex[:6]}"
    objects = [
        o
        for o in helm.template(
            f"operator.watchNamespace={k8s_namespace}",
            release=release,
            namespace=k8s_namespace,
        )
        if o["kind"] in RBAC_KINDS
    ]
    k8s_cluster.kubectl(
        "apply", "-n", k8s_namespace, "-f", "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
    )  # fmt: skip
    try:
        yield f"{release}-kaos-operator"
    finally:
        for o in objects:
            if o["kind"].startswith("Cluster"):
                k8s_cluster.kubectl(
                    "delete", o["kind"], o["metadata"]["name"], "--wait=false", check=False
                )


def token_kubeconfig(cluster: Cluster, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig authenticating as ``account`` (a TokenRequest): its RBAC and no more."""
    token = cluster.kubectl(
        "create", "token", account, "-n", namespace, "--duration=30m"
    ).stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    cluster_name = admin["clusters"][0]["name"]
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": account, "user": {"token": token}}],
                "contexts": [
                    {"name": account, "context": {"cluster": cluster_name, "user": account}}
                ],
                "current-context": account,
            }
        )
    )
    return path


async def test_the_charts_rbac_lets_the_operator_name_a_pending_claim(
    kube: KubeClient,
    k8s_cluster: Cluster,
    k8s_namespace: str,
    chart_rbac: str,
    operator_factory: OperatorFactory,
    tmp_path: Path,
) -> None:
    ns = k8s_namespace
    kubeconfig = token_kubeconfig(k8s_cluster, ns, chart_rbac, tmp_path / "operator.kubeconfig")
    operator_factory(KUBECONFIG=str(kubeconfig))
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(kube, ns, "MemoryStore", "mem", store_spec())

    # Listing the claim's Events and the pods needs the chart's grants: without them the
    # operator would report only DeploymentProgressing.
    store = await ready_reason(kube, MEMORYSTORES, ns, "mem", reasons.CLAIM_PENDING)
    assert UNBOUND in store["status"]["message"]
