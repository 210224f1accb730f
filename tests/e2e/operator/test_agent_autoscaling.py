"""An Agent's spec.autoscaling on the real API server: the schema refusing what cannot
scale, a HorizontalPodAutoscaler on CPU when the cluster serves no KEDA ScaledObjects, a
ScaledObject once it does (KEDA's CRD installed before the operator starts), the status
naming the scaler, and the Deployment's replicas left to whoever scaled it last."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kaos_core.crds.reasons import (
    AUTOSCALED,
    AUTOSCALING_OFF,
    HORIZONTAL_POD_AUTOSCALER,
    KEDA_SCALED_OBJECT,
)
from kaos_operator.desired.common import FIELD_MANAGER
from kaos_operator.kube import (
    CRDS,
    DEPLOYMENTS,
    HPAS,
    SCALEDOBJECTS,
    KubeClient,
    Obj,
    PermanentError,
)

from tests.e2e.operator.helpers import AGENTS, condition, create, eventually, proxy_api
from tests.fixtures.operator import OperatorFactory, apply_crds
from tests.support.keda import SCALED_OBJECT_CRD, keda_crds

pytestmark = pytest.mark.cluster

EXTERNAL = {"type": "external", "connectionSecret": {"name": "pg", "key": "url"}}
SCALING = {"minReplicas": 2, "maxReplicas": 5, "targetRunsPerReplica": 3}
# Another manager writing the scale subresource, as the HPA controller does.
SCALER = "test-scaler"


def agent_spec(**extra: Any) -> dict[str, Any]:
    return {
        "modelAPI": "llm",
        "waitForDependencies": False,
        "taskStore": EXTERNAL,
        "autoscaling": SCALING,
        **extra,
    }


async def patch_agent(kube: KubeClient, ns: str, spec: dict[str, Any]) -> None:
    await kube.request(
        "PATCH",
        AGENTS.path(ns, "a1"),
        body={"spec": spec},
        content_type="application/merge-patch+json",
    )


async def scaled_by(kube: KubeClient, ns: str, reason: str) -> Obj:
    async def probe() -> Obj | None:
        agent = await kube.get(AGENTS, ns, "a1")
        cond = condition(agent, AUTOSCALED)
        return agent if cond is not None and cond["reason"] == reason else None

    return await eventually(probe, within=120, what=f"Autoscaled with reason {reason}")


def applied_fields(dep: Obj) -> dict[str, Any]:
    """The spec fields the operator's server-side apply holds on ``dep``."""
    for entry in dep["metadata"].get("managedFields") or []:
        if entry["manager"] == FIELD_MANAGER and entry["operation"] == "Apply":
            return dict(entry["fieldsV1"].get("f:spec") or {})
    return {}


async def refused(kube: KubeClient, ns: str, spec: dict[str, Any]) -> str:
    with pytest.raises(PermanentError) as info:
        await create(kube, ns, "Agent", "bad", spec)
    assert info.value.status == 422, info.value
    return info.value.message


@pytest.fixture
async def keda_api(kube: KubeClient, kaos_crds: Path) -> AsyncIterator[None]:
    """The cluster serving KEDA's ScaledObjects (its CRD, no KEDA running), removed after."""
    (crd,) = keda_crds(SCALED_OBJECT_CRD)
    await apply_crds(kaos_crds, [crd])
    try:
        yield
    finally:
        await kube.delete(CRDS, None, crd["metadata"]["name"])

        async def gone() -> bool:
            return not await kube.serves(SCALEDOBJECTS)

        await eventually(gone, within=60, what="ScaledObjects no longer served")


async def test_schema_refuses_what_cannot_scale(kube: KubeClient, k8s_namespace: str) -> None:
    ns = k8s_namespace
    local = agent_spec(taskStore={"type": "local"})
    assert "a local task store is one SQLite file" in await refused(kube, ns, local)
    inverted = agent_spec(autoscaling={"minReplicas": 4, "maxReplicas": 2})
    assert "maxReplicas must be at least minReplicas" in await refused(kube, ns, inverted)
    assert "spec.autoscaling.maxReplicas" in await refused(
        kube, ns, agent_spec(autoscaling={"maxReplicas": 101})
    )
    assert "spec.autoscaling.targetCPUUtilization" in await refused(
        kube, ns, agent_spec(autoscaling={"maxReplicas": 3, "targetCPUUtilization": 0})
    )
    # The defaults the server fills in.
    made = await create(kube, ns, "Agent", "ok", agent_spec(autoscaling={"maxReplicas": 3}))
    assert made["spec"]["autoscaling"] == {
        "minReplicas": 1,
        "maxReplicas": 3,
        "targetRunsPerReplica": 4,
    }


async def test_without_keda_an_hpa_then_replicas_left_to_the_scaler(
    kube: KubeClient, k8s_namespace: str, operator_factory: OperatorFactory
) -> None:
    ns = k8s_namespace
    assert not await kube.serves(SCALEDOBJECTS), "a KEDA CRD left over by another test"
    operator_factory()
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(kube, ns, "Agent", "a1", agent_spec(replicas=1))

    agent = await scaled_by(kube, ns, HORIZONTAL_POD_AUTOSCALER)
    assert agent["status"]["scaler"] == "hpa"
    cond = condition(agent, AUTOSCALED)
    assert cond is not None and cond["status"] == "True"
    assert "HorizontalPodAutoscaler a1" in cond["message"] and "CPU at 70%" in cond["message"]
    hpa = await kube.get(HPAS, ns, "a1")
    assert hpa is not None
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 5)
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "a1",
    }
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 70
    (owner,) = hpa["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Agent", "a1")
    dep = await kube.get(DEPLOYMENTS, ns, "a1")
    assert dep is not None
    # spec.replicas 1 starts inside the bounds, applied by the operator until scaled.
    assert dep["spec"]["replicas"] == 2
    assert "f:replicas" in applied_fields(dep)

    # A scaler writes the scale subresource, as the HPA controller does.
    await kube.request(
        "PATCH",
        DEPLOYMENTS.path(ns, "a1", "scale"),
        query=[("fieldManager", SCALER)],
        body={"spec": {"replicas": 4}},
        content_type="application/merge-patch+json",
    )

    async def let_go() -> Obj | None:
        live = await kube.get(DEPLOYMENTS, ns, "a1")
        return live if live is not None and "f:replicas" not in applied_fields(live) else None

    dep = await eventually(let_go, within=60, what="the operator to stop applying replicas")
    assert dep["spec"]["replicas"] == 4
    # A change that makes the operator apply the Deployment again leaves the scale alone.
    generation = dep["metadata"]["generation"]
    await patch_agent(kube, ns, {"config": {"description": "scaled"}})

    async def reapplied() -> Obj | None:
        live = await kube.get(DEPLOYMENTS, ns, "a1")
        return live if live is not None and live["metadata"]["generation"] > generation else None

    dep = await eventually(reapplied, within=60, what="the Deployment applied again")
    assert dep["spec"]["replicas"] == 4
    assert "f:replicas" not in applied_fields(dep)

    # Autoscaling off: the HPA is pruned and spec.replicas applied again.
    await patch_agent(kube, ns, {"autoscaling": None, "replicas": 3})
    agent = await scaled_by(kube, ns, AUTOSCALING_OFF)
    assert agent["status"]["scaler"] == "none"

    async def hpa_gone() -> bool:
        return await kube.get(HPAS, ns, "a1") is None

    await eventually(hpa_gone, within=60, what="the HPA to be pruned")

    async def fixed() -> Obj | None:
        live = await kube.get(DEPLOYMENTS, ns, "a1")
        return live if live is not None and live["spec"]["replicas"] == 3 else None

    await eventually(fixed, within=60, what="the Deployment back at spec.replicas")


async def test_keda_served_makes_a_scaled_object(
    kube: KubeClient, k8s_namespace: str, keda_api: None, operator_factory: OperatorFactory
) -> None:
    ns = k8s_namespace
    operator_factory()  # started after the CRD: it finds ScaledObjects served
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(
        kube,
        ns,
        "Agent",
        "a1",
        agent_spec(autoscaling={**SCALING, "targetCPUUtilization": 60}),
    )

    agent = await scaled_by(kube, ns, KEDA_SCALED_OBJECT)
    assert agent["status"]["scaler"] == "keda"
    cond = condition(agent, AUTOSCALED)
    assert cond is not None and "KEDA ScaledObject a1" in cond["message"]
    so = await kube.get(SCALEDOBJECTS, ns, "a1")
    assert so is not None
    spec = so["spec"]
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 5)
    assert spec["scaleTargetRef"]["name"] == "a1"
    load, cpu = spec["triggers"]
    assert load["type"] == "metrics-api" and load["metricType"] == "AverageValue"
    assert load["metadata"]["url"] == f"http://a1.{ns}.svc:8000/load"
    assert load["metadata"]["targetValue"] == "3"
    assert cpu == {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}
    (owner,) = so["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Agent", "a1")
    # Not both: no HPA of the operator's own.
    assert await kube.get(HPAS, ns, "a1") is None
