"""What kwok needs: the nodes it plays the kubelet of, its pod log and its PortForward kind."""

from __future__ import annotations

from typing import Any

# Pod IPs are recorded by kwok, never dialled: nothing listens behind them.
POD_CIDR = "10.244.0.0/16"
# Every simulated container's log is this file of the cluster's workdir (a kwok ClusterLogs,
# followed), so ``kubectl logs [-f]`` has something to serve: tests append lines to it.
POD_LOG_NAME = "pod-logs.log"
# The annotation that tells kwok which nodes it plays the kubelet for.
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
# kwok's PortForward kind, served as a CRD (``--enable-crds=PortForward``) so a test can
# point ``kubectl port-forward`` to a simulated pod at a process on loopback (the console's
# tests reach the local stack through the API server that way). Schema-free: kwok validates.
KWOK_PORTFORWARD_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "portforwards.kwok.x-k8s.io"},
    "spec": {
        "group": "kwok.x-k8s.io",
        "scope": "Namespaced",
        "names": {"kind": "PortForward", "listKind": "PortForwardList",
                  "plural": "portforwards", "singular": "portforward"},
        "versions": [{
            "name": "v1alpha1", "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object", "x-kubernetes-preserve-unknown-fields": True,
            }},
        }],
    },
}  # fmt: skip


def _fake_node(name: str) -> dict[str, Any]:
    key, value = KWOK_NODE_ANNOTATION
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {key: value, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "kubernetes.io/hostname": name,
                "type": "kwok",
            },
        },
        # No taint: ordinary workloads (the operator, the chart) schedule as they are.
        "spec": {},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        },
    }
