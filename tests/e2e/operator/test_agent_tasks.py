"""An Agent's task store, rollout and drain on the real API server: what the operator
applies for each ``spec.taskStore``, what the server keeps of it (the preStop sleep
action, the strategy switched by server-side apply), the disruption budget pruned at one
replica, and the schema refusing what cannot run."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_core.crds.reasons import TASKS_IN_POD_MEMORY, TASKS_SHARED
from kaos_operator.kube import DEPLOYMENTS, EVENTS, PDBS, PVCS, KubeClient, Obj, PermanentError

from tests.e2e.operator.helpers import (
    AGENTS,
    condition,
    container_env,
    create,
    eventually,
    proxy_api,
    volume_for,
)
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

EXTERNAL = {"type": "external", "connectionSecret": {"name": "pg", "key": "url"}}
POD_NAME_REF = {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}
ROLLING = {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}


async def patch_agent(kube: KubeClient, ns: str, name: str, spec: dict[str, Any]) -> None:
    await kube.request(
        "PATCH",
        AGENTS.path(ns, name),
        body={"spec": spec},
        content_type="application/merge-patch+json",
    )


async def deployment_where(kube: KubeClient, ns: str, name: str, test: Any, what: str) -> Obj:
    async def probe() -> Obj | None:
        dep = await kube.get(DEPLOYMENTS, ns, name)
        return dep if dep is not None and test(dep) else None

    return await eventually(probe, within=120, what=what)


async def test_external_store_replicas_budget_and_scale_down(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(
        kube,
        ns,
        "Agent",
        "a1",
        {
            "modelAPI": "llm",
            "replicas": 3,
            "taskStore": EXTERNAL,
            "config": {"taskConfig": {"maxWallTimeSeconds": 120}},
        },
    )

    async def budget() -> Obj | None:
        return await kube.get(PDBS, ns, "a1")

    pdb = await eventually(budget, within=120, what="the Agent's PodDisruptionBudget")
    dep = await kube.get(DEPLOYMENTS, ns, "a1")
    assert dep is not None
    env = container_env(dep)
    # The DSN as a reference: the operator never read the Secret (it does not exist).
    assert env["TASK_STORE_DSN"] == {"secretKeyRef": {"name": "pg", "key": "url"}}
    assert env["TASK_STORE_TYPE"] == "external"
    assert env["TASK_RETENTION_SECONDS"] == "86400"
    assert env["POD_NAME"] == POD_NAME_REF
    assert dep["spec"]["replicas"] == 3
    assert dep["spec"]["strategy"] == ROLLING
    pod = dep["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 135  # 120 + the preStop sleep + margin
    # The server kept the kubelet's sleep action (it drops a field it does not know).
    assert pod["containers"][0]["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    (owner,) = pdb["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Agent", "a1", True)

    async def shared() -> dict[str, Any] | None:
        cond = condition(await kube.get(AGENTS, ns, "a1"), TASKS_SHARED)
        return cond if cond is not None and cond["status"] == "True" else None

    await eventually(shared, within=60, what="TasksShared=True")

    await patch_agent(kube, ns, "a1", {"replicas": 1})

    async def budget_gone() -> bool:
        return await kube.get(PDBS, ns, "a1") is None

    await eventually(budget_gone, within=60, what="the PDB to be pruned at one replica")
    await deployment_where(
        kube, ns, "a1", lambda d: d["spec"]["replicas"] == 1, "the Deployment at one replica"
    )


async def test_memory_replicas_run_with_a_warning(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(kube, ns, "Agent", "a1", {"modelAPI": "llm", "replicas": 2})

    async def apart() -> dict[str, Any] | None:
        cond = condition(await kube.get(AGENTS, ns, "a1"), TASKS_SHARED)
        return cond if cond is not None and cond["status"] == "False" else None

    cond = await eventually(apart, within=120, what="TasksShared=False")
    assert cond["reason"] == TASKS_IN_POD_MEMORY
    assert "spec.taskStore.type external" in cond["message"]

    async def warning() -> list[Obj]:
        events = (await kube.list(EVENTS, ns)).get("items", [])
        return [
            e
            for e in events
            if e["involvedObject"]["name"] == "a1" and e["reason"] == TASKS_IN_POD_MEMORY
        ]

    (event,) = await eventually(warning, within=60, what="the Warning Event")
    assert event["type"] == "Warning" and event["message"] == cond["message"]
    # Run as asked, capacity kept while rolling, one pod at a time drained.
    dep = await deployment_where(
        kube, ns, "a1", lambda d: d["spec"]["replicas"] == 2, "a1's Deployment of 2 replicas"
    )
    assert dep["spec"]["strategy"] == ROLLING
    assert container_env(dep)["TASK_STORE_TYPE"] == "memory"

    async def budget() -> Obj | None:
        return await kube.get(PDBS, ns, "a1")

    await eventually(budget, within=60, what="the Agent's PodDisruptionBudget")


def _local(dep: Obj) -> bool:
    return bool(dep["spec"]["strategy"] == {"type": "Recreate"})


async def test_local_store_claim_mount_and_recreate(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await volume_for(kube, ns, "b1-tasks", size="1Gi")
    await create(
        kube,
        ns,
        "Agent",
        "b1",
        {"modelAPI": "llm", "taskStore": {"type": "local", "size": "1Gi"}},
    )
    dep = await deployment_where(kube, ns, "b1", _local, "b1's Recreate Deployment")
    claim = await kube.get(PVCS, ns, "b1-tasks")
    assert claim is not None
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Agent", "b1")
    pod = dep["spec"]["template"]["spec"]
    assert {"name": "tasks", "persistentVolumeClaim": {"claimName": "b1-tasks"}} in pod["volumes"]
    (mount,) = pod["containers"][0]["volumeMounts"]
    assert (mount["name"], mount["mountPath"]) == ("tasks", "/var/lib/kaos/tasks")
    env = container_env(dep)
    assert env["TASK_STORE_TYPE"] == "local"
    assert env["TASK_STORE_PATH"] == "/var/lib/kaos/tasks/tasks.db"
    assert env["POD_NAME"] == POD_NAME_REF
    assert await kube.get(PDBS, ns, "b1") is None


async def test_a_running_agent_switched_to_a_local_store(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    """RollingUpdate to Recreate by server-side apply: the rolling parameters go with it
    (the server refuses a Recreate strategy that still has them)."""
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(kube, ns, "Agent", "a1", {"modelAPI": "llm"})
    await deployment_where(
        kube, ns, "a1", lambda d: d["spec"]["strategy"] == ROLLING, "a1's rolling Deployment"
    )
    await volume_for(kube, ns, "a1-tasks", size="256Mi")
    await patch_agent(kube, ns, "a1", {"taskStore": {"type": "local"}})
    dep = await deployment_where(kube, ns, "a1", _local, "a1's Deployment switched to Recreate")
    assert "rollingUpdate" not in dep["spec"]["strategy"]
    assert await kube.get(PVCS, ns, "a1-tasks") is not None
    # And back: the claim is pruned with the store that needed it.
    await patch_agent(kube, ns, "a1", {"taskStore": {"type": "memory"}})
    await deployment_where(
        kube, ns, "a1", lambda d: d["spec"]["strategy"] == ROLLING, "a1 rolling again"
    )

    async def claim_gone() -> bool:
        claim = await kube.get(PVCS, ns, "a1-tasks")
        return claim is None or bool(claim["metadata"].get("deletionTimestamp"))

    await eventually(claim_gone, within=60, what="the tasks claim to be pruned")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"replicas": 2, "taskStore": {"type": "local"}},
            "a local task store is one SQLite file on one volume, so the Agent runs exactly"
            " one replica; use an external (PostgreSQL) task store for more",
        ),
        (
            {"taskStore": {"type": "external"}},
            "an external task store requires connectionSecret; memory and local take none",
        ),
        (
            {"taskStore": {"type": "local", "egress": [{"cidr": "10.0.0.0/8"}]}},
            "egress is the external task store's database: memory and local take none",
        ),
    ],
    ids=["local-replicas", "external-without-secret", "egress-without-external"],
)
async def test_the_schema_refuses_what_cannot_run(
    kube: KubeClient, k8s_namespace: str, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(PermanentError) as info:
        await create(kube, k8s_namespace, "Agent", "bad", {"modelAPI": "llm", **spec})
    assert info.value.status == 422, info.value
    assert message in info.value.message
    assert await kube.get(AGENTS, k8s_namespace, "bad") is None
