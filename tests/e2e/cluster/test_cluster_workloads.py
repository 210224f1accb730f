"""Workloads on the test cluster behave as on a real one: kwok's simulated nodes take the
scheduled pods to Running and Ready, so Deployments become Available and scale."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.cluster import KWOK_NODE_ANNOTATION, Cluster, wait_until

pytestmark = pytest.mark.cluster


def deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    # Never pulled: kwok simulates the container.
                    "containers": [{"name": "web", "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def live_pods(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    out = cluster.kubectl(
        "get", "pods", "-n", namespace, "-l", f"app.kubernetes.io/name={name}", "-o", "json"
    ).stdout
    return [p for p in json.loads(out)["items"] if not p["metadata"].get("deletionTimestamp")]


def running_and_ready(pod: dict[str, Any]) -> bool:
    conditions = {c["type"]: c["status"] for c in pod["status"].get("conditions", [])}
    return pod["status"].get("phase") == "Running" and conditions.get("Ready") == "True"


def all_running(pods: list[dict[str, Any]], count: int) -> list[dict[str, Any]] | None:
    ready = len(pods) == count and all(running_and_ready(p) for p in pods)
    return pods if ready else None


def simulated_nodes(cluster: Cluster) -> set[str]:
    nodes = json.loads(cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    key, value = KWOK_NODE_ANNOTATION
    return {
        n["metadata"]["name"]
        for n in nodes
        if n["metadata"].get("annotations", {}).get(key) == value
    }


def test_deployment_becomes_available_on_simulated_nodes_and_scales(
    k8s_cluster: Cluster, k8s_namespace: str
) -> None:
    ns = k8s_namespace
    k8s_cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(deployment("web", 2)))

    k8s_cluster.kubectl(
        "wait", "-n", ns, "deployment/web", "--for=condition=Available", "--timeout=60s"
    )
    k8s_cluster.kubectl(
        "wait", "-n", ns, "deployment/web", "--for=jsonpath={.status.availableReplicas}=2",
        "--timeout=60s",
    )  # fmt: skip
    pods = live_pods(k8s_cluster, ns, "web")
    assert len(pods) == 2
    assert all(running_and_ready(p) for p in pods), pods
    assert {p["spec"]["nodeName"] for p in pods} <= simulated_nodes(k8s_cluster)
    assert all(p["status"].get("podIP") for p in pods), "kwok assigns pod IPs"

    k8s_cluster.kubectl("scale", "-n", ns, "deployment/web", "--replicas=4")
    k8s_cluster.kubectl("rollout", "status", "-n", ns, "deployment/web", "--timeout=60s")
    pods = wait_until(lambda: all_running(live_pods(k8s_cluster, ns, "web"), 4), what="4 pods")
    assert len(pods) == 4

    k8s_cluster.kubectl("scale", "-n", ns, "deployment/web", "--replicas=1")
    wait_until(lambda: len(live_pods(k8s_cluster, ns, "web")) == 1, what="1 pod after scale-down")
    # kwok finishes the deletion a kubelet would: the pods go, not just get marked.
    wait_until(
        lambda: len(json.loads(k8s_cluster.kubectl(
            "get", "pods", "-n", ns, "-l", "app.kubernetes.io/name=web", "-o", "json"
        ).stdout)["items"]) == 1,
        what="terminated pods removed",
    )  # fmt: skip
    status = json.loads(
        k8s_cluster.kubectl("get", "deployment", "web", "-n", ns, "-o", "json").stdout
    )["status"]
    assert status.get("availableReplicas") == 1
