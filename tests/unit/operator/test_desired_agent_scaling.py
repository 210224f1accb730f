"""An Agent's autoscaler as its desired objects say: KEDA's ScaledObject where the cluster
serves it, else an HPA on CPU; the Deployment's replicas left to the scaler once it holds
them; the condition naming the scaler; the schema's bounds and CEL rules."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_core.crds import Agent, reasons
from kaos_core.crds.generate import crd_document
from kaos_operator.desired import AgentContext, desired_agent_objects
from kaos_operator.desired.agent_scaling import (
    START_ANNOTATION,
    autoscaled_condition,
    deployment_replicas,
    scaler_holds_replicas,
    scaler_of,
)
from kaos_operator.desired.common import AGENT_PORT
from pydantic import ValidationError

from tests.support.operator_objects import IMAGES, OPEN, SECURED, agent, by_kind

SCALING = {"minReplicas": 2, "maxReplicas": 10}
EXTERNAL = {"type": "external", "connectionSecret": {"name": "pg", "key": "url"}}


def ctx(**kw: Any) -> AgentContext:
    base: dict[str, Any] = {
        "images": IMAGES,
        "posture": OPEN,
        "model_api_url": "http://llm.ns.svc:4000",
        "model_name": "m",
    }
    return AgentContext(**{**base, **kw})


def scaled(agentNetwork: dict[str, Any] | None = None, **scaling: Any) -> Agent:
    extra = {} if agentNetwork is None else {"agentNetwork": agentNetwork}
    return agent("a1", taskStore=EXTERNAL, autoscaling={**SCALING, **scaling}, **extra)


def test_without_autoscaling_no_scaler_and_replicas_applied() -> None:
    a = agent("a1", replicas=3, taskStore=EXTERNAL)
    objs = by_kind(desired_agent_objects(a, ctx(keda_served=True)))
    assert "ScaledObject" not in objs and "HorizontalPodAutoscaler" not in objs
    assert objs["Deployment"]["spec"]["replicas"] == 3
    assert scaler_of(a, keda_served=True) == "none"
    status, reason, message = autoscaled_condition(a, "none")
    assert (status, reason) == (False, reasons.AUTOSCALING_OFF)
    assert "spec.replicas" in message


def test_keda_served_makes_a_scaled_object_on_the_agent_load() -> None:
    a = scaled(targetRunsPerReplica=3)
    objs = by_kind(desired_agent_objects(a, ctx(keda_served=True)))
    assert "HorizontalPodAutoscaler" not in objs
    so = objs["ScaledObject"]
    assert so["apiVersion"] == "keda.sh/v1alpha1"
    (owner,) = so["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Agent", "a1", True)
    spec = so["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "a1"}
    assert (spec["minReplicaCount"], spec["maxReplicaCount"]) == (2, 10)
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "metrics-api"
    # An Agent-wide load through the Service: the HPA's average divides it by replicas.
    assert trigger["metricType"] == "AverageValue"
    assert trigger["metadata"] == {
        "url": "http://a1.ns.svc:8000/load",
        "format": "json",
        "valueLocation": "load",
        "targetValue": "3",
    }
    assert scaler_of(a, keda_served=True) == "keda"


def test_keda_adds_a_cpu_trigger_only_when_asked() -> None:
    objs = by_kind(desired_agent_objects(scaled(targetCPUUtilization=55), ctx(keda_served=True)))
    triggers = objs["ScaledObject"]["spec"]["triggers"]
    assert [t["type"] for t in triggers] == ["metrics-api", "cpu"]
    assert triggers[1] == {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "55"}}
    _, reason, message = autoscaled_condition(scaled(targetCPUUtilization=55), "keda")
    assert reason == reasons.KEDA_SCALED_OBJECT
    assert "KEDA ScaledObject a1" in message and "CPU at 55%" in message


@pytest.mark.parametrize(("cpu", "expected"), [(None, 70), (40, 40)])
def test_without_keda_an_hpa_on_cpu(cpu: int | None, expected: int) -> None:
    a = scaled(**({"targetCPUUtilization": cpu} if cpu else {}))
    objs = by_kind(desired_agent_objects(a, ctx(keda_served=False)))
    assert "ScaledObject" not in objs
    hpa = objs["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["metadata"]["name"] == "a1"
    spec = hpa["spec"]
    assert (spec["minReplicas"], spec["maxReplicas"]) == (2, 10)
    assert spec["scaleTargetRef"]["name"] == "a1"
    (metric,) = spec["metrics"]
    assert metric["resource"] == {
        "name": "cpu",
        "target": {"type": "Utilization", "averageUtilization": expected},
    }
    status, reason, message = autoscaled_condition(a, scaler_of(a, keda_served=False))
    assert (status, reason) == (True, reasons.HORIZONTAL_POD_AUTOSCALER)
    assert message.startswith("HorizontalPodAutoscaler a1 ")
    assert f"CPU at {expected}%" in message and "no KEDA" in message


@pytest.mark.parametrize(("start", "expected"), [(1, 2), (5, 5), (50, 10)])
def test_replicas_start_inside_the_bounds_until_the_scaler_holds_them(
    start: int, expected: int
) -> None:
    a = agent("a1", replicas=start, taskStore=EXTERNAL, autoscaling=SCALING)
    dep = by_kind(desired_agent_objects(a, ctx()))["Deployment"]
    assert dep["spec"]["replicas"] == expected
    held = by_kind(desired_agent_objects(a, ctx(scaler_holds_replicas=True)))["Deployment"]
    assert "replicas" not in held["spec"]
    # Everything but replicas is the same Deployment.
    assert {k: v for k, v in dep["spec"].items() if k != "replicas"} == held["spec"]
    assert dep["metadata"] == held["metadata"]
    assert deployment_replicas(a, scaler_holds=True) is None
    # Without autoscaling the operator applies spec.replicas whoever wrote it last.
    fixed = agent("a1", replicas=start)
    assert deployment_replicas(fixed, scaler_holds=True) == start


def live(replicas: int, start: str | None) -> dict[str, Any]:
    annotations = {START_ANNOTATION: start} if start is not None else {}
    return {"metadata": {"annotations": annotations}, "spec": {"replicas": replicas}}


def test_the_scaler_holds_replicas_once_it_moved_them_from_the_start() -> None:
    assert not scaler_holds_replicas(None)
    # Not autoscaled before (no start noted): the operator's own replicas.
    assert not scaler_holds_replicas(live(3, None))
    assert not scaler_holds_replicas(live(2, "2"))
    assert scaler_holds_replicas(live(4, "2"))
    assert scaler_holds_replicas(live(1, "2"))


def test_the_start_is_noted_on_the_deployment_only_when_autoscaled() -> None:
    a = agent("a1", replicas=1, taskStore=EXTERNAL, autoscaling=SCALING)
    dep = by_kind(desired_agent_objects(a, ctx()))["Deployment"]
    assert dep["metadata"]["annotations"] == {START_ANNOTATION: "2"}
    # The pod template is untouched: noting the start rolls nothing out.
    assert START_ANNOTATION not in (dep["spec"]["template"]["metadata"].get("annotations") or {})
    # The scaler moved them: still noted, so a later reconcile still sees them held.
    held = by_kind(desired_agent_objects(a, ctx(scaler_holds_replicas=True)))["Deployment"]
    assert held["metadata"]["annotations"] == {START_ANNOTATION: "2"}
    assert scaler_holds_replicas({**held, "spec": {**held["spec"], "replicas": 5}})
    fixed = by_kind(desired_agent_objects(agent("a1", replicas=3), ctx()))["Deployment"]
    assert "annotations" not in fixed["metadata"]


@pytest.mark.parametrize(
    ("scaling", "field"),
    [
        ({"maxReplicas": 101}, "max_replicas"),
        ({"maxReplicas": 3, "minReplicas": 0}, "min_replicas"),
        ({"maxReplicas": 3, "targetRunsPerReplica": 0}, "target_runs_per_replica"),
        ({"maxReplicas": 3, "targetCPUUtilization": 101}, "target_cpu_utilization"),
        ({"maxReplicas": 3, "targetCPUUtilization": 0}, "target_cpu_utilization"),
        ({"minReplicas": 2}, "max_replicas"),
    ],
)
def test_model_bounds(scaling: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        agent("a1", autoscaling=scaling)
    assert field in str(info.value) or field.replace("_", "") in str(info.value).lower()


def test_defaults_and_cel_rules_in_the_schema() -> None:
    a = agent("a1", autoscaling={"maxReplicas": 4})
    assert a.spec.autoscaling is not None
    assert (a.spec.autoscaling.min_replicas, a.spec.autoscaling.target_runs_per_replica) == (1, 4)
    assert a.spec.autoscaling.target_cpu_utilization is None
    root = crd_document(Agent.info)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = root["properties"]["spec"]
    block = spec["properties"]["autoscaling"]
    assert block["required"] == ["maxReplicas"]
    assert {r["rule"] for r in block["x-kubernetes-validations"]} == {
        "self.maxReplicas >= self.minReplicas"
    }
    messages = {r["message"] for r in spec["x-kubernetes-validations"]}
    assert any(m.startswith("autoscaling needs more than one replica") for m in messages)
    scaler = root["properties"]["status"]["properties"]["scaler"]
    assert scaler["enum"] == ["keda", "hpa", "none"]


def test_secured_an_agent_keda_scales_admits_keda_on_its_port() -> None:
    secured = SECURED.model_copy(update={"keda_namespace": "autoscalers"})

    def ingress(a: Agent, keda_served: bool) -> list[dict[str, Any]]:
        objs = by_kind(desired_agent_objects(a, ctx(posture=secured, keda_served=keda_served)))
        return list(objs["NetworkPolicy"]["spec"]["ingress"])

    keda = {
        "from": [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "autoscalers"}}}
        ],
        "ports": [{"protocol": "TCP", "port": AGENT_PORT}],
    }
    closed = {"expose": False}  # only its callers pass (it has none here)
    # KEDA scales it: its scaler reads GET /load through the Service, so KEDA's pods pass.
    assert ingress(scaled(agentNetwork=closed), keda_served=True) == [keda]
    # An HPA on CPU (no KEDA), or no autoscaling: nothing passes.
    assert ingress(scaled(agentNetwork=closed), keda_served=False) == []
    assert ingress(agent("a1", taskStore=EXTERNAL, agentNetwork=closed), keda_served=True) == []
    # An Agent open to every pod (the default) admits KEDA's already: no rule of its own.
    assert ingress(scaled(), keda_served=True) == [
        {"ports": [{"protocol": "TCP", "port": AGENT_PORT}]}
    ]
