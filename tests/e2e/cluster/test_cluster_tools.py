"""kubectl and helm, the command-line clients the project scripts and charts use, work
against the test cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cluster import Binaries, Cluster

pytestmark = pytest.mark.cluster


def test_kubectl_sees_the_pinned_server_and_ready_simulated_nodes(k8s_cluster: Cluster) -> None:
    version = json.loads(k8s_cluster.kubectl("version", "-o", "json").stdout)
    if k8s_cluster.workdir is not None:  # our own control plane, not KAOS_TEST_KUBECONFIG's
        assert version["serverVersion"]["gitVersion"] == Binaries.locate().kube_version

    nodes = json.loads(k8s_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    ready = {
        n["metadata"]["name"]
        for n in nodes
        if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])
    }
    assert set(k8s_cluster.node_names) <= ready


def test_kubectl_auth_follows_rbac(k8s_cluster: Cluster, k8s_namespace: str) -> None:
    k8s_cluster.kubectl("create", "serviceaccount", "reader", "-n", k8s_namespace)
    as_reader = ["--as", f"system:serviceaccount:{k8s_namespace}:reader", "-n", k8s_namespace]

    before = k8s_cluster.kubectl("auth", "can-i", "list", "pods", *as_reader, check=False)
    k8s_cluster.kubectl(
        "create", "rolebinding", "reader-view", "--clusterrole=view",
        f"--serviceaccount={k8s_namespace}:reader", "-n", k8s_namespace,
    )  # fmt: skip
    after = k8s_cluster.kubectl("auth", "can-i", "list", "pods", *as_reader, check=False)

    assert before.stdout.strip() == "no"
    assert after.stdout.strip() == "yes"


def test_helm_installs_lists_and_uninstalls_a_chart(
    k8s_cluster: Cluster, k8s_namespace: str, tmp_path: Path
) -> None:
    chart = tmp_path / "probe"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(
        "apiVersion: v2\nname: probe\nversion: 0.1.0\nkubeVersion: '>=1.30.0-0'\n"
    )
    (chart / "templates" / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\n"
        "data:\n  greeting: {{ .Values.greeting | quote }}\n"
    )
    (chart / "values.yaml").write_text("greeting: hello\n")

    version = k8s_cluster.run_helm("version", "--short").stdout
    assert version.startswith("v4."), version

    ns = ["--namespace", k8s_namespace]
    k8s_cluster.run_helm("install", "probe", str(chart), *ns, "--set", "greeting=hi")
    releases = json.loads(k8s_cluster.run_helm("list", *ns, "--output", "json").stdout)
    configmap = json.loads(
        k8s_cluster.kubectl("get", "configmap", "probe-settings", *ns, "-o", "json").stdout
    )
    k8s_cluster.run_helm("uninstall", "probe", *ns)
    after = json.loads(k8s_cluster.run_helm("list", *ns, "--output", "json").stdout)

    assert [(r["name"], r["status"]) for r in releases] == [("probe", "deployed")]
    assert configmap["data"] == {"greeting": "hi"}
    assert after == []
