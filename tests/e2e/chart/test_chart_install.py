"""``kaos system install`` puts the chart on the test cluster: the CRDs, a least-privilege
operator and the development pgvector; the samples apply; an upgrade with changed values
rolls the operator; ``kaos system uninstall`` removes everything but the CRDs.

The CLI runs as a subprocess with the cluster's kubeconfig, as an administrator would
run it. The cluster's nodes are kwok's: pods become Running and Ready without running a
container, so Deployments become Available but nothing inside them serves.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.helm import SAMPLES_DIR, Helm
from tests.support.cluster import Cluster, wait_until
from tests.support.procs import console_script, free_port, start_service

pytestmark = pytest.mark.cluster

NAMESPACE = "kaos-system"
SAMPLES_NS = "kaos-samples"
OPERATOR_SA = f"system:serviceaccount:{NAMESPACE}:kaos-operator"
CRDS = ("agents", "modelapis", "mcpservers", "memorystores")
LOCAL_STORE_VOLUME: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolume",
    "metadata": {"name": "kaos-e2e-memory-local"},
    "spec": {
        "capacity": {"storage": "5Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "hostPath": {"path": "/tmp/kaos-e2e-memory-local"},
    },
}
INSTALL_FLAGS = (
    "--pgvector-memory-enabled",
    "--set",
    f"devPgvector.connectionSecret.extraNamespaces={{{SAMPLES_NS}}}",
)


def kaos(
    cluster: Cluster, helm: Helm, *argv: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    env = helm.env(cluster.env())
    env["KAOS_HELM"] = str(helm.binary)
    return subprocess.run(
        [console_script("kaos"), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def get_json(cluster: Cluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def exists(cluster: Cluster, *args: str) -> bool:
    return cluster.kubectl("get", *args, check=False).returncode == 0


def can_i(cluster: Cluster, verb: str, resource: str, *args: str) -> bool:
    """A SubjectAccessReview for the operator's ServiceAccount (kubectl auth can-i)."""
    proc = cluster.kubectl(
        "auth", "can-i", verb, resource, f"--as={OPERATOR_SA}", *args, check=False
    )
    answer = proc.stdout.strip()
    assert answer in ("yes", "no"), proc.stderr
    return answer == "yes"


def can_i_unserved(cluster: Cluster, verb: str, group: str, resource: str, ns: str) -> bool:
    """``can_i`` for a resource the cluster may not serve (KEDA's, without KEDA installed):
    kubectl resolves a resource through discovery, so the review is sent as written."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": OPERATOR_SA,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}"],
            "resourceAttributes": {
                "verb": verb,
                "group": group,
                "resource": resource,
                "namespace": ns,
            },
        },
    }
    proc = cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(review))
    return bool(json.loads(proc.stdout)["status"].get("allowed"))


def rollout(cluster: Cluster, name: str, namespace: str = NAMESPACE) -> None:
    cluster.kubectl(
        "rollout", "status", f"deployment/{name}", "-n", namespace, "--timeout=120s", timeout=150
    )


def ensure_namespace(cluster: Cluster, name: str) -> None:
    """Create ``name``, after a previous run's deletion of it has finished."""

    def settled() -> str | None:
        proc = cluster.kubectl(
            "get", "namespace", name, "-o", "jsonpath={.status.phase}", check=False
        )
        if proc.returncode != 0:
            return "absent"
        return "active" if proc.stdout == "Active" else None

    if wait_until(settled, timeout=120, what=f"namespace {name} settled") == "absent":
        cluster.kubectl("create", "namespace", name)


@pytest.fixture(scope="module")
def installed(k8s_cluster: Cluster, helm: Helm) -> Iterator[Cluster]:
    """KAOS installed by the CLI (with the development pgvector), uninstalled afterwards."""
    ensure_namespace(k8s_cluster, SAMPLES_NS)
    proc = kaos(k8s_cluster, helm, "system", "install", *INSTALL_FLAGS)
    assert proc.returncode == 0, proc.stderr
    assert "KAOS 0.1.0 is installed in namespace kaos-system" in proc.stdout
    try:
        yield k8s_cluster
    finally:
        kaos(k8s_cluster, helm, "system", "uninstall")
        k8s_cluster.kubectl("delete", "namespace", SAMPLES_NS, "--wait=false", check=False)


def test_install_creates_the_operator_and_the_dev_pgvector(installed: Cluster) -> None:
    for crd in CRDS:
        assert exists(installed, "crd", f"{crd}.kaos.tools")
    for obj in (
        "serviceaccount/kaos-operator",
        "configmap/kaos-operator",
        "role.rbac.authorization.k8s.io/kaos-operator-leader-election",
        "rolebinding.rbac.authorization.k8s.io/kaos-operator-leader-election",
        "poddisruptionbudget.policy/kaos-operator",
        "service/kaos-operator-metrics",
        "deployment/kaos-pgvector",
        "service/kaos-pgvector",
        "secret/kaos-pgvector",
        "secret/kaos-pgvector-connection",
        "configmap/kaos-pgvector-initdb",
    ):
        assert exists(installed, obj, "-n", NAMESPACE), obj
    assert exists(installed, "clusterrole/kaos-operator")
    assert exists(installed, "clusterrolebinding/kaos-operator")

    rollout(installed, "kaos-operator")
    rollout(installed, "kaos-pgvector")
    deployment = get_json(installed, "deployment/kaos-operator", "-n", NAMESPACE)
    assert deployment["status"]["availableReplicas"] == 1

    # The connection Secret a MemoryStore in the samples namespace references.
    secret = get_json(installed, "secret/kaos-pgvector-connection", "-n", SAMPLES_NS)
    dsn = base64.b64decode(secret["data"]["dsn"]).decode()
    assert dsn.startswith("postgresql://kaos:")
    assert "@kaos-pgvector.kaos-system.svc:5432/kaos" in dsn


def test_samples_apply_and_are_stored(installed: Cluster) -> None:
    proc = installed.kubectl("apply", "--server-side", "-n", SAMPLES_NS, "-f", str(SAMPLES_DIR))
    assert "agent.kaos.tools/coordinator serverside-applied" in proc.stdout

    for kind, names in (
        ("modelapis.kaos.tools", {"devmodel-api"}),
        ("mcpservers.kaos.tools", {"text-tools"}),
        ("memorystores.kaos.tools", {"memory-local", "memory-pgvector"}),
        ("agents.kaos.tools", {"coordinator", "researcher"}),
    ):
        items = get_json(installed, kind, "-n", SAMPLES_NS)["items"]
        assert {i["metadata"]["name"] for i in items} == names
    # Defaults of the CRD schema were applied by the API server.
    store = get_json(installed, "memorystores.kaos.tools/memory-local", "-n", SAMPLES_NS)
    assert store["spec"]["collection"] == "kaos_memory"


def test_cli_lists_the_sample_agents(installed: Cluster, helm: Helm) -> None:
    installed.kubectl("apply", "--server-side", "-n", SAMPLES_NS, "-f", str(SAMPLES_DIR))

    proc = kaos(installed, helm, "agent", "list", "-n", SAMPLES_NS)
    assert proc.returncode == 0, proc.stderr
    header, *rows = proc.stdout.splitlines()
    assert header.split()[:6] == ["NAME", "MODELAPI", "MODEL", "MCP", "MEMORY", "DELEGATES"]
    by_name = {row.split()[0]: row.split() for row in rows}
    assert set(by_name) == {"coordinator", "researcher"}
    assert by_name["coordinator"][1:6] == [
        "devmodel-api", "openai/devmodel", "-", "remote:memory-local", "researcher"
    ]  # fmt: skip

    proc = kaos(installed, helm, "agent", "list", "-A", "-o", "json")
    names = {a["metadata"]["name"] for a in json.loads(proc.stdout)}
    assert {"coordinator", "researcher"} <= names


def test_cli_memory_reaches_a_store_through_port_forward(installed: Cluster, helm: Helm) -> None:
    """The store is found and forwarded to; kwok runs no container behind it, so the
    service does not answer, and the CLI says so in one line."""
    installed.kubectl("apply", "--server-side", "-n", SAMPLES_NS, "-f", str(SAMPLES_DIR))

    proc = kaos(
        installed, helm, "memory", "list", "--store", "memory-local", "-n", SAMPLES_NS,
        "--level", "store", "--timeout", "5",
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: ")
    assert len(proc.stderr.strip().splitlines()) == 1

    proc = kaos(
        installed, helm, "memory", "list", "--store", "no-such-store", "-n", SAMPLES_NS,
        "--level", "store",
    )  # fmt: skip
    assert proc.returncode == 1
    assert "no-such-store" in proc.stderr and "not found" in proc.stderr


def service_account_kubeconfig(cluster: Cluster, path: Path) -> Path:
    """A kubeconfig that authenticates as the operator's ServiceAccount (a TokenRequest),
    so a process using it has exactly the chart's RBAC and nothing more."""
    token = cluster.kubectl(
        "create", "token", "kaos-operator", "-n", NAMESPACE, "--duration=1h"
    ).stdout.strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": admin["clusters"],
        "users": [{"name": "kaos-operator", "user": {"token": token}}],
        "contexts": [
            {
                "name": "kaos-operator",
                "context": {"cluster": admin["clusters"][0]["name"], "user": "kaos-operator"},
            }
        ],
        "current-context": "kaos-operator",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def phases(cluster: Cluster) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for kind in ("modelapis", "mcpservers", "memorystores", "agents"):
        for item in get_json(cluster, f"{kind}.kaos.tools", "-n", SAMPLES_NS)["items"]:
            name = f"{item['kind']}/{item['metadata']['name']}"
            found[name] = (item.get("status") or {}).get("phase")
    return found


def test_operator_under_its_service_account_makes_the_samples_ready(
    installed: Cluster, tmp_path: Path
) -> None:
    """The operator process (run here, as kwok runs no containers) authenticates as the
    chart's ServiceAccount with the chart's ConfigMap as its environment: if the chart
    lacked a permission it needs, the samples would not become Ready."""
    installed.kubectl("apply", "--server-side", "-n", SAMPLES_NS, "-f", str(SAMPLES_DIR))
    # The test cluster has no volume provisioner: a static volume for the local store.
    installed.kubectl("apply", "-f", "-", input=json.dumps(LOCAL_STORE_VOLUME))
    config = get_json(installed, "configmap/kaos-operator", "-n", NAMESPACE)["data"]
    port = free_port()
    env = {
        **config,
        "KUBECONFIG": str(service_account_kubeconfig(installed, tmp_path / "kubeconfig")),
        "KAOS_OPERATOR_HOST": "127.0.0.1",
        "KAOS_OPERATOR_PORT": str(port),
        "KAOS_OPERATOR_NAMESPACE": NAMESPACE,
        "KAOS_OPERATOR_LEASE_NAME": "kaos-operator",
        "KAOS_OPERATOR_LEADER_ELECTION": "true",
        "KAOS_OPERATOR_IDENTITY": "e2e-local-operator",
        "KAOS_OPERATOR_WATCH_NAMESPACE": "",
    }
    operator = start_service(
        "kaos-operator", [console_script("kaos-operator")], port=port, env=env,
        log_dir=tmp_path, ready_path="/healthz",
    )  # fmt: skip
    try:

        def all_ready() -> dict[str, str | None] | None:
            found = phases(installed)
            return found if found and all(v == "Ready" for v in found.values()) else None

        ready = wait_until(all_ready, timeout=180, what="every sample Ready")
        assert len(ready) == 6
        lease = get_json(installed, "lease/kaos-operator", "-n", NAMESPACE)
        assert lease["spec"]["holderIdentity"] == "e2e-local-operator"
        assert exists(installed, "deployment/coordinator", "-n", SAMPLES_NS)
        assert "forbidden" not in operator.log_tail(400).lower()
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- operator log ---\n{operator.log_tail(60)}") from exc
    finally:
        operator.stop(timeout=20)
        installed.kubectl("delete", "pv", LOCAL_STORE_VOLUME["metadata"]["name"], "--wait=false")


def test_operator_can_do_what_it_needs(installed: Cluster) -> None:
    ns = ["-n", SAMPLES_NS]
    for verb, resource in (
        ("list", "agents.kaos.tools"),
        ("watch", "memorystores.kaos.tools"),
        ("get", "mcpservers.kaos.tools"),
        ("create", "deployments.apps"),
        ("patch", "deployments.apps"),
        ("delete", "services"),
        ("create", "configmaps"),
        ("create", "persistentvolumeclaims"),
        ("create", "poddisruptionbudgets.policy"),
        ("create", "serviceaccounts"),
        ("delete", "serviceaccounts"),
        ("create", "networkpolicies.networking.k8s.io"),
        ("watch", "networkpolicies.networking.k8s.io"),
        ("watch", "horizontalpodautoscalers.autoscaling"),
        ("create", "events"),
    ):
        assert can_i(installed, verb, resource, *ns), f"{verb} {resource}"
    assert can_i_unserved(installed, "create", "keda.sh", "scaledobjects", SAMPLES_NS)
    assert can_i(installed, "patch", "agents.kaos.tools", "--subresource=status", *ns)
    assert can_i(installed, "list", "agents.kaos.tools", "--all-namespaces")
    # Its own Lease, in its own namespace.
    assert can_i(installed, "create", "leases.coordination.k8s.io", "-n", NAMESPACE)
    assert can_i(installed, "update", "leases.coordination.k8s.io/kaos-operator", "-n", NAMESPACE)


def test_operator_is_refused_everything_else(installed: Cluster) -> None:
    refused = [
        # Secrets: not even the connection Secret its MemoryStores reference.
        ("get", "secrets/kaos-pgvector-connection", "-n", SAMPLES_NS),
        ("list", "secrets", "--all-namespaces"),
        ("get", "secrets", "-n", "kube-system"),
        # Things it never creates or deletes.
        ("create", "agents.kaos.tools", "-n", SAMPLES_NS),
        ("delete", "memorystores.kaos.tools", "-n", SAMPLES_NS),
        # Spec and metadata of its resources are the user's: it only writes status.
        ("patch", "agents.kaos.tools", "-n", SAMPLES_NS),
        ("update", "modelapis.kaos.tools", "-n", SAMPLES_NS),
        ("get", "pods", "-n", SAMPLES_NS),
        ("create", "pods", "-n", SAMPLES_NS),
        # It creates Agents' ServiceAccounts but can mint no token of any of them.
        # (kubectl reads "serviceaccounts/token" as a ServiceAccount named token.)
        ("create", "serviceaccounts", "--subresource=token", "-n", SAMPLES_NS),
        ("create", "rolebindings.rbac.authorization.k8s.io", "-n", SAMPLES_NS),
        ("create", "clusterroles.rbac.authorization.k8s.io"),
        ("delete", "customresourcedefinitions.apiextensions.k8s.io"),
        ("create", "namespaces"),
        ("list", "nodes"),
        # Only its own Lease, only in its namespace.
        ("update", "leases.coordination.k8s.io/someone-else", "-n", NAMESPACE),
        ("create", "leases.coordination.k8s.io", "-n", SAMPLES_NS),
        # kube-system: no secrets, pods, leases or service accounts.
        ("get", "pods", "-n", "kube-system"),
        ("update", "leases.coordination.k8s.io/kube-controller-manager", "-n", "kube-system"),
        ("create", "serviceaccounts", "--subresource=token", "-n", "kube-system"),
    ]
    allowed = [r for r in refused if can_i(installed, *r)]
    assert allowed == []


def test_upgrade_rolls_the_operator_then_uninstall_keeps_only_the_crds(
    installed: Cluster, helm: Helm
) -> None:
    before = get_json(installed, "deployment/kaos-operator", "-n", NAMESPACE)
    password = get_json(installed, "secret/kaos-pgvector", "-n", NAMESPACE)["data"]["password"]
    old_hash = before["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    proc = kaos(
        installed, helm, "system", "install", *INSTALL_FLAGS,
        "--set", "posture.securityEnabled=true",
        "--set", f"operator.watchNamespace={SAMPLES_NS}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr

    after = get_json(installed, "deployment/kaos-operator", "-n", NAMESPACE)
    assert after["metadata"]["generation"] > before["metadata"]["generation"]
    assert after["spec"]["template"]["metadata"]["annotations"]["checksum/config"] != old_hash
    rollout(installed, "kaos-operator")
    pods = get_json(
        installed, "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=operator"
    )
    live = [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]
    current_rs = wait_until(
        lambda: {p["metadata"]["labels"]["pod-template-hash"] for p in live} or None,
        what="operator pods",
    )
    rs = get_json(
        installed, "replicasets", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=operator"
    )
    assert len(rs["items"]) >= 2, "the upgrade made a new ReplicaSet"
    newest = max(
        rs["items"],
        key=lambda r: int(r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]),
    )
    assert current_rs == {newest["metadata"]["labels"]["pod-template-hash"]}
    config = get_json(installed, "configmap/kaos-operator", "-n", NAMESPACE)["data"]
    assert config["KAOS_SECURITY_ENABLED"] == "true"
    # The generated password survived the upgrade (the chart looks it up).
    assert (
        get_json(installed, "secret/kaos-pgvector", "-n", NAMESPACE)["data"]["password"] == password
    )

    # Scoped to one namespace: the operator has no rights in kube-system or elsewhere.
    assert not can_i(installed, "create", "deployments.apps", "-n", "kube-system")
    assert not can_i(installed, "list", "agents.kaos.tools", "-n", "default")
    assert not can_i(installed, "get", "configmaps", "-n", "kube-system")
    assert can_i(installed, "create", "deployments.apps", "-n", SAMPLES_NS)
    assert not exists(installed, "clusterrolebinding/kaos-operator")

    proc = kaos(installed, helm, "system", "uninstall", "--wait")
    assert proc.returncode == 0, proc.stderr
    assert "The KAOS CRDs stay installed" in proc.stdout
    assert wait_until(
        lambda: not _labelled(installed) or None, what="chart objects gone", timeout=60
    )
    assert not exists(installed, "clusterrole/kaos-operator")
    for crd in CRDS:
        assert exists(installed, "crd", f"{crd}.kaos.tools")
    # The samples, being KAOS resources, stay with their CRDs.
    assert exists(installed, "agents.kaos.tools/coordinator", "-n", SAMPLES_NS)


def _labelled(cluster: Cluster) -> list[str]:
    """Objects of the release still present (pods may take a moment to go)."""
    names = cluster.kubectl(
        "get", "deployments,services,pods,configmaps,secrets,serviceaccounts,roles,rolebindings,"
        "poddisruptionbudgets", "-A", "-l", "app.kubernetes.io/instance=kaos", "-o", "name",
    ).stdout.split()  # fmt: skip
    return [n for n in names if n]


def test_uninstall_of_a_missing_release_is_one_line(k8s_cluster: Cluster, helm: Helm) -> None:
    proc = kaos(k8s_cluster, helm, "system", "uninstall", "--release", "never-installed")
    assert proc.returncode == 1
    assert (
        proc.stderr.strip() == "error: release never-installed not found in namespace kaos-system"
    )


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ("operator.replicas=-1", "at '/operator/replicas': minimum: got -1, want 0"),
        ("posture.mode=strict", "at '/posture': additional properties 'mode' not allowed"),
    ],
)
def test_invalid_values_fail_the_install_with_the_schema_message(
    k8s_cluster: Cluster, helm: Helm, assignment: str, message: str
) -> None:
    proc = kaos(
        k8s_cluster, helm, "system", "install", "--release", "kaos-invalid",
        "--namespace", "kaos-invalid", "--set", assignment,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: helm upgrade --install failed:")
    assert message in proc.stderr
    releases = helm.run("list", "-A", "-q", env=k8s_cluster.env()).stdout.split()
    assert "kaos-invalid" not in releases
