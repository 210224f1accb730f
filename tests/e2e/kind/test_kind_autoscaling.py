"""Issue 36's autoscaling on the agent's own load, end to end on the real node: KEDA's
operator and metrics adapter, the controller-manager's HorizontalPodAutoscaler controller,
and an Agent whose in-flight A2A runs are the load.

KEDA is run the way its chart runs it, as processes rather than pods (``hack/keda-build``
makes its binaries; the test is skipped where they are not built):

- its operator in the node's network namespace, where the agent's Service address routes
  and, in a mount namespace of its own, ``/etc/resolv.conf`` names the cluster's DNS, so
  its ``metrics-api`` scaler reads ``GET /load`` at the URL the KAOS operator wrote;
- its metrics adapter on the host end of the node's link, registered as the
  ``external.metrics.k8s.io`` APIService through a Service whose endpoint is that
  address (the API server routes aggregated APIs to endpoints);
- the two speak gRPC over mutual TLS, as in the chart.

The load is bounded: the development model holds every chat request (a fault), so the
tasks sent stay in flight until the test lets them go. Judged: the Agent's status names
KEDA; the replicas rise to the maximum under the load and, once it has ended, fall back
to the minimum; every task sent completes (but the one cancelled).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.e2e.kind.helpers import (
    EXTERNAL_TASK_STORE,
    KindDeployment,
    devmodel_agent,
    post_json,
    wait_ready,
)
from tests.support.cluster import wait_until
from tests.support.keda import grpc_certs, keda_binaries, keda_crds, operator_args, operator_env
from tests.support.procs import REPO_ROOT, ServiceProcess, free_port, start_service

pytestmark = [pytest.mark.kind, pytest.mark.realnode, pytest.mark.timeout(1800)]

RELEASE_NAMESPACE = "kaos-system"
OPERATOR = "kaos-operator"
KEDA_NAMESPACE = "default"
ADAPTER_SERVICE = "keda-metrics-apiserver"
METRICS_API = "v1beta1.external.metrics.k8s.io"
SCALING = {"minReplicas": 1, "maxReplicas": 3, "targetRunsPerReplica": 2}
# Tasks sent: the first is cancelled (tests.support.a2a_load), six stay in flight: a load
# of 6 at 2 a replica asks for 3 replicas, the maximum.
TASKS = 7
READY_TIMEOUT = 300.0
SCALE_TIMEOUT = 240.0


def _apply(kind: KindDeployment, *objects: dict[str, Any], namespace: str | None = None) -> None:
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    args = ["apply", "--server-side", "--force-conflicts", "-f", "-"]
    if namespace is not None:
        args = ["-n", namespace, *args]
    kind.kubectl(*args, input=doc, timeout=120)


def _restart_operator(kind: KindDeployment) -> None:
    """The KAOS operator looks for KEDA's ScaledObjects when it starts."""
    ns = ["-n", RELEASE_NAMESPACE]
    kind.kubectl(*ns, "rollout", "restart", f"deployment/{OPERATOR}")
    kind.kubectl(*ns, "rollout", "status", f"deployment/{OPERATOR}", "--timeout=300s", timeout=320)


def _addresses(kind: KindDeployment) -> tuple[str, str, str]:
    """The host end of the node's link (where the API server listens), the node's IP and
    the cluster DNS Service's address."""
    host = urlsplit(yaml.safe_load(kind.kubeconfig.read_text())["clusters"][0]["cluster"]["server"])
    nodes = kind.get("nodes")
    assert nodes is not None
    node_ip = next(
        a["address"] for a in nodes["items"][0]["status"]["addresses"] if a["type"] == "InternalIP"
    )
    dns = kind.get("service", "kube-dns", "-n", "kube-system")
    assert dns is not None and host.hostname is not None
    return host.hostname, node_ip, dns["spec"]["clusterIP"]


def _resolv_conf(path: Path, dns: str, namespace: str) -> Path:
    search = f"{namespace}.svc.cluster.local svc.cluster.local cluster.local"
    path.write_text(f"nameserver {dns}\nsearch {search}\noptions ndots:5\n")
    return path


@pytest.fixture
def keda(kind: KindDeployment, tmp_path: Path) -> Iterator[None]:
    """KEDA's CRDs, operator and adapter, with the KAOS operator restarted to see them;
    everything undone afterwards."""
    if kind.in_netns is None:
        pytest.skip("KEDA's operator runs in the real node's network namespace")
    binaries = keda_binaries()
    host_ip, node_ip, dns = _addresses(kind)
    crds = keda_crds()
    certs = grpc_certs(tmp_path / "keda-certs")
    kubeconfig = str(kind.kubeconfig)
    operator: ServiceProcess | None = None
    adapter: subprocess.Popen[bytes] | None = None
    _apply(kind, *crds)
    try:
        _restart_operator(kind)
        probe, grpc = free_port(), free_port()
        resolv = _resolv_conf(tmp_path / "resolv.conf", dns, kind.namespace)
        script = f'mount --bind "{resolv}" /etc/resolv.conf && exec "$0" "$@"'
        operator = start_service(
            "keda-operator",
            kind.in_netns(
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-c",
                script,
                *operator_args(
                    binaries.operator,
                    bind="0.0.0.0",
                    probe=probe,
                    grpc=grpc,
                    certs=certs,
                    ca_dir=tmp_path / "keda-ca",
                ),
            ),
            port=probe,
            host=node_ip,
            env=operator_env(kind.kubeconfig, kind.namespace, KEDA_NAMESPACE),
            log_dir=tmp_path / "keda-logs",
            ready_path="/readyz",
            timeout=180,
        )
        secure = free_port()
        # The process keeps its own copy of the log file: ours closes once it has started.
        with open(tmp_path / "keda-logs" / "keda-adapter.log", "ab") as adapter_log:
            adapter = subprocess.Popen(
                [
                    str(binaries.adapter),
                    f"--secure-port={secure}",
                    f"--bind-address={host_ip}",
                    f"--port={free_port()}",
                    f"--cert-dir={certs}",
                    f"--tls-cert-file={certs / 'tls.crt'}",
                    f"--tls-private-key-file={certs / 'tls.key'}",
                    f"--metrics-service-address={node_ip}:{grpc}",
                    "--metrics-service-grpc-authority=localhost",
                    f"--authentication-kubeconfig={kubeconfig}",
                    f"--authorization-kubeconfig={kubeconfig}",
                    f"--lister-kubeconfig={kubeconfig}",
                ],
                env={
                    "PATH": "/usr/bin:/bin",
                    "KUBECONFIG": kubeconfig,
                    "WATCH_NAMESPACE": kind.namespace,
                    "POD_NAMESPACE": KEDA_NAMESPACE,
                    "KEDA_CLUSTER_OBJECT_NAMESPACE": KEDA_NAMESPACE,
                },
                stdout=adapter_log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        _apply(kind, *_metrics_api(host_ip, secure), namespace=KEDA_NAMESPACE)
        wait_until(
            lambda: _available(kind), timeout=180, what=f"the APIService {METRICS_API} Available"
        )
        yield
    finally:
        kind.kubectl("delete", "apiservice", METRICS_API, "--ignore-not-found", check=False)
        kind.kubectl(
            "-n", KEDA_NAMESPACE, "delete", "service,endpoints", ADAPTER_SERVICE,
            "--ignore-not-found", check=False,
        )  # fmt: skip
        kind.kubectl(
            "delete", "clusterrole,clusterrolebinding", "keda-hpa-external-metrics",
            "--ignore-not-found", check=False,
        )  # fmt: skip
        if adapter is not None:
            adapter.terminate()
            adapter.wait(timeout=30)
        if operator is not None:
            operator.stop(timeout=15)
        for crd in crds:
            kind.kubectl(
                "delete", "crd", crd["metadata"]["name"], "--ignore-not-found", "--wait=false",
                check=False,
            )  # fmt: skip
        _restart_operator(kind)


def _metrics_api(host_ip: str, port: int) -> list[dict[str, Any]]:
    """The APIService of external metrics, its Service and the endpoint on the host; and
    the HPA controller's right to read them (what KEDA's chart grants)."""
    meta = {"name": ADAPTER_SERVICE, "namespace": KEDA_NAMESPACE}
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]},
        },
        {
            "apiVersion": "v1",
            "kind": "Endpoints",
            "metadata": meta,
            "subsets": [
                {"addresses": [{"ip": host_ip}], "ports": [{"name": "https", "port": port}]}
            ],
        },
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": METRICS_API},
            "spec": {
                "group": "external.metrics.k8s.io",
                "version": "v1beta1",
                "service": {"name": ADAPTER_SERVICE, "namespace": KEDA_NAMESPACE, "port": 443},
                "insecureSkipTLSVerify": True,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "keda-hpa-external-metrics"},
            "rules": [
                {"apiGroups": ["external.metrics.k8s.io"], "resources": ["*"], "verbs": ["*"]}
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "keda-hpa-external-metrics"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "keda-hpa-external-metrics",
            },
            "subjects": [
                {
                    "kind": "ServiceAccount",
                    "name": "horizontal-pod-autoscaler",
                    "namespace": "kube-system",
                }
            ],
        },
    ]


def _available(kind: KindDeployment) -> bool:
    found = kind.get("apiservice", METRICS_API)
    conditions = ((found or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


def _replicas(kind: KindDeployment, name: str) -> tuple[int, int]:
    """(asked for, ready) of the Agent's Deployment."""
    dep = kind.get("deployment", name)
    assert dep is not None
    return int(dep["spec"].get("replicas", 1)), int(dep.get("status", {}).get("readyReplicas") or 0)


def test_the_agents_own_load_scales_it_out_and_back(kind: KindDeployment, keda: None) -> None:
    assert kind.in_netns is not None
    agent = f"scaled-{uuid.uuid4().hex[:6]}"
    held = {"name": "MODEL_TIMEOUT_SECONDS", "value": str(int(SCALE_TIMEOUT + 120))}
    _apply(
        kind,
        devmodel_agent(
            agent,
            taskStore=EXTERNAL_TASK_STORE,
            autoscaling=SCALING,
            # The held model calls outlast the scale-out, not the agent's patience.
            container={"env": [held]},
        ),
    )
    try:
        wait_ready(kind, agent, READY_TIMEOUT)
        obj = kind.get("agent.kaos.tools", agent)
        assert obj is not None
        assert obj["status"]["scaler"] == "keda", obj["status"]
        wait_until(
            lambda: kind.get("hpa", f"keda-hpa-{agent}") is not None,
            timeout=120,
            what="KEDA's HPA for the Agent",
        )
        service = kind.get("service", agent)
        assert service is not None
        url = f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"
        with kind.forward("devmodel", 8000) as model:
            # Every chat request is held until the faults change: the tasks stay in flight.
            post_json(model + "/control/faults", {"hang": True, "routes": ["chat"]})
            load = subprocess.Popen(
                kind.in_netns(
                    sys.executable,
                    "-m",
                    "tests.support.a2a_load",
                    url,
                    agent[-6:],
                    str(TASKS),
                    "--within=600",
                ),
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                text=True,
            )
            try:
                assert load.stdout is not None
                for line in load.stdout:
                    if line.strip() == "SENT":
                        break
                sent = time.monotonic()
                wait_until(
                    lambda: _replicas(kind, agent) == (3, 3),
                    timeout=SCALE_TIMEOUT,
                    what="the Agent scaled out to 3 ready replicas under its load",
                )
                out = time.monotonic() - sent
            finally:
                post_json(model + "/control/faults", {})
            report = json.loads(load.stdout.read().strip().splitlines()[-1])
            assert load.wait(timeout=120) == 0
        cancelled = {t for t, a in report["cancels"].items() if a == "TASK_STATE_CANCELED"}
        ends = {t: f["state"] for t, f in report["final"].items() if t not in cancelled}
        assert report["send_errors"] == [] and len(report["sent"]) == TASKS, report
        assert set(ends.values()) == {"TASK_STATE_COMPLETED"}, ends
        # The load is gone: back to the minimum once the scale-down window has passed.
        ended = time.monotonic()
        wait_until(
            lambda: _replicas(kind, agent)[0] == 1,
            timeout=SCALE_TIMEOUT,
            what="the Agent scaled back to 1 replica after its load ended",
        )
        print(
            f"\n{TASKS - len(cancelled)} tasks in flight: 3 ready replicas {out:.0f} s after"
            f" they were sent; back to 1 replica {time.monotonic() - ended:.0f} s after they"
            " ended"
        )
    finally:
        kind.kubectl("delete", f"agent/{agent}", "--wait=true", "--timeout=120s", check=False)
