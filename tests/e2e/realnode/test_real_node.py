"""The test cluster's real node: pods are real containers (containerd, runc), reach each
other through Services and DNS, hold their security context, keep their volumes, and the
node leaves the machine as it found it.

The tests run in file order on one cluster; the last one takes it down.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from kaos_cli.kubectl.forward import port_forward

from tests.e2e.realnode.conftest import NodeCluster
from tests.support.cluster import (
    REAL_NODE_NAME,
    localpath,
    netpol,
    processes_mentioning,
    wait_until,
)
from tests.support.cluster.host import host_changes, host_snapshot
from tests.support.realnode import TOOLBOX_IMAGE

pytestmark = [pytest.mark.realnode, pytest.mark.timeout(600)]

READY_TIMEOUT = 120.0


def _pod(name: str, command: str, **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": TOOLBOX_IMAGE,
        "imagePullPolicy": "Never",
        "command": ["/bin/sh", "-c", command],
        **extra.pop("container", {}),
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [container], "terminationGracePeriodSeconds": 1, **extra},
    }


def _apply(node: NodeCluster, ns: str, *objects: dict[str, Any]) -> None:
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    node.cluster.kubectl("apply", "-n", ns, "-f", "-", input=doc)


def _get(node: NodeCluster, ns: str, *args: str) -> dict[str, Any]:
    out = node.cluster.kubectl("get", "-n", ns, *args, "-o", "json").stdout
    document: dict[str, Any] = json.loads(out)
    return document


def _ready_pod(node: NodeCluster, ns: str, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        pod = _get(node, ns, "pod", name)
        statuses = pod.get("status", {}).get("containerStatuses") or []
        return pod if statuses and all(s.get("ready") for s in statuses) else None

    return wait_until(probe, timeout=READY_TIMEOUT, what=f"pod {ns}/{name} Ready")


def _exec(node: NodeCluster, ns: str, pod: str, *argv: str, check: bool = True) -> Any:
    return node.cluster.kubectl("exec", "-n", ns, pod, "--", *argv, check=check)


def _runtime_containers(node: NodeCluster) -> set[str]:
    """The container IDs containerd itself lists in the CRI's namespace."""
    local_node = node.local._node
    assert local_node is not None
    import subprocess

    out = subprocess.run(
        local_node.ctr("containers", "ls", "-q"), capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


@pytest.fixture
def ns(real_node: NodeCluster) -> Any:
    name = f"rn-{uuid.uuid4().hex[:8]}"
    real_node.cluster.kubectl("create", "namespace", name)
    yield name
    real_node.cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_the_node_is_a_ready_kubelet_on_containerd(real_node: NodeCluster) -> None:
    nodes = json.loads(real_node.cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert [n["metadata"]["name"] for n in nodes] == [REAL_NODE_NAME]
    info = nodes[0]["status"]["nodeInfo"]
    assert info["containerRuntimeVersion"] == "containerd://2.4.2", info
    assert info["kubeletVersion"] == "v1.37.2", info
    ready = [c for c in nodes[0]["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True", ready


def test_pods_are_real_containers_behind_services_and_dns(real_node: NodeCluster, ns: str) -> None:
    token = uuid.uuid4().hex
    web = _pod(
        "web",
        f"mkdir -p /tmp/www && echo {token} > /tmp/www/index.html && "
        "exec httpd -f -p 8080 -h /tmp/www",
        container={"readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1}},
    )
    client = _pod("client", f"echo started-{token}; exec sleep 3600")
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
    }
    _apply(real_node, ns, web, client, service)
    pods = [_ready_pod(real_node, ns, "web"), _ready_pod(real_node, ns, "client")]

    # Every container is Ready and is one that containerd runs.
    listed = _runtime_containers(real_node)
    for pod in pods:
        for status in pod["status"]["containerStatuses"]:
            assert status["ready"] is True
            runtime, _, cid = status["containerID"].partition("://")
            assert runtime == "containerd" and cid in listed, (status, listed)
    assert pods[0]["status"]["podIP"].startswith("10.244.0.")

    # DNS names the Service and the API server's; the Service routes to the pod.
    answer = _exec(real_node, ns, "client", "nslookup", "kubernetes.default.svc.cluster.local")
    assert "10.96.0.1" in answer.stdout, answer.stdout

    # kube-proxy programs the Service's DNAT rule some time after the endpoint turns Ready;
    # a connection begun before that keeps its un-NATed conntrack entry through every SYN
    # retry, so each attempt is a new connection with a short timeout until the rule is in.
    # (busybox's own `wget -T` crashes in this build, 1.35.0 static: its `timeout` applet
    # bounds the attempt instead.)
    def fetch() -> str | None:
        got = _exec(real_node, ns, "client", "busybox", "timeout", "3", "wget", "-q", "-O",
                    "-", f"http://web.{ns}/", check=False)  # fmt: skip
        return got.stdout.strip() if got.returncode == 0 else None

    assert wait_until(fetch, timeout=READY_TIMEOUT, what=f"Service web.{ns} routes") == token
    # The API server answers pods through the `kubernetes` Service: busybox's wget cannot
    # complete the TLS handshake (no cipher in common), but the server's TLS alert shows
    # that the connection reached it.
    probe = _exec(real_node, ns, "client", "busybox", "timeout", "10", "wget", "-O", "-",
                  "https://kubernetes.default.svc/readyz", check=False)  # fmt: skip
    assert "(10.96.0.1:443)" in probe.stderr and "TLS error from peer" in probe.stderr, probe

    # The kubelet serves logs (the API server reaches it with its client certificate).
    logs = real_node.cluster.kubectl("logs", "-n", ns, "client").stdout
    assert f"started-{token}" in logs

    # And port-forwards, as the kind suite reaches every Service (the kaos CLI's helper).
    assert real_node.cluster.bin_dir is not None
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KUBECONFIG", str(real_node.cluster.kubeconfig))
        kubectl = str(real_node.cluster.bin_dir / "kubectl")
        with port_forward(kubectl, ns, "web", 80) as url, urllib.request.urlopen(url) as resp:
            assert resp.read().decode().strip() == token


def test_security_context_holds_in_the_container(real_node: NodeCluster, ns: str) -> None:
    pod = _pod(
        "locked",
        "exec sleep 3600",
        securityContext={"runAsUser": 65532, "runAsGroup": 65532, "runAsNonRoot": True},
        container={
            "securityContext": {
                "readOnlyRootFilesystem": True,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        },
        volumes=[{"name": "tmp", "emptyDir": {}}],
    )
    _apply(real_node, ns, pod)
    _ready_pod(real_node, ns, "locked")
    ident = _exec(real_node, ns, "locked", "id").stdout
    assert ident.startswith("uid=65532 gid=65532"), ident
    write = _exec(real_node, ns, "locked", "touch", "/written", check=False)
    assert write.returncode != 0 and "Read-only file system" in write.stderr, write
    assert _exec(real_node, ns, "locked", "touch", "/tmp/ok").returncode == 0
    status = _exec(real_node, ns, "locked", "cat", "/proc/self/status").stdout
    assert "NoNewPrivs:\t1" in status, status
    assert "CapEff:\t0000000000000000" in status, status


def test_a_claimed_volume_outlives_its_pod(real_node: NodeCluster, ns: str) -> None:
    """A claim without a class gets the default one, whose provisioner makes its volume on
    the node when the first pod needs it, and removes it with the claim."""
    token = uuid.uuid4().hex
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    volume = {
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        "container": {"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
        "securityContext": {"runAsUser": 65532},
    }
    writer = _pod("writer", f"echo {token} > /data/token && exec sleep 3600", **volume)
    _apply(real_node, ns, claim, writer)
    first = _ready_pod(real_node, ns, "writer")
    real_node.cluster.kubectl("delete", "pod", "-n", ns, "writer", "--wait=true")
    reader = _pod("reader", "exec sleep 3600", **volume)
    _apply(real_node, ns, reader)
    _ready_pod(real_node, ns, "reader")
    assert _exec(real_node, ns, "reader", "cat", "/data/token").stdout.strip() == token
    old_id = first["status"]["containerStatuses"][0]["containerID"].partition("://")[2]
    wait_until(lambda: old_id not in _runtime_containers(real_node), timeout=READY_TIMEOUT,
               what="the deleted pod's container gone from containerd")  # fmt: skip

    # The provisioner made the volume: a directory of the node's, pinned to the node.
    bound = _get(real_node, ns, "pvc", "data")
    assert bound["spec"]["storageClassName"] == localpath.STORAGE_CLASS
    assert bound["status"]["phase"] == "Bound"
    pv = json.loads(real_node.cluster.kubectl(
        "get", "pv", bound["spec"]["volumeName"], "-o", "json").stdout)  # fmt: skip
    assert pv["metadata"]["annotations"][localpath.PROVISIONED_BY] == localpath.PROVISIONER
    assert pv["spec"]["storageClassName"] == localpath.STORAGE_CLASS
    node = real_node.local._node
    assert node is not None
    directory = Path(pv["spec"]["hostPath"]["path"])
    assert directory.parent == node.volumes_dir
    assert (directory / "token").read_text().strip() == token

    # Deleting the claim deletes the volume and its directory (the class's reclaim policy).
    real_node.cluster.kubectl("delete", "pod", "-n", ns, "reader", "--wait=true")
    real_node.cluster.kubectl("delete", "pvc", "-n", ns, "data", "--wait=true")
    gone = real_node.cluster.kubectl("wait", "--for=delete", f"pv/{pv['metadata']['name']}",
                                     f"--timeout={READY_TIMEOUT:g}s", check=False)  # fmt: skip
    assert gone.returncode == 0, gone.stderr
    assert not directory.exists()


def test_down_leaves_the_machine_as_it_found_it(real_node: NodeCluster) -> None:
    assert real_node.local.workdir is not None
    node = real_node.local._node
    assert node is not None
    workdir, cgroup_root, host_if = node.workdir, node.cgroup_root, node.host_if
    # The NetworkPolicy engine's chains are there while it runs (so the check sees them).
    assert any("KUBE-ROUTER-FORWARD" in line for line in netpol.leftovers(node.in_netns))
    real_node.shutdown()
    before, after = real_node.before, real_node.after

    # sysctls, iptables (both back ends), ipsets, links, addresses, routes, mounts, cgroups,
    # paths.
    assert host_changes(before, after) == {}
    # Its chains and sets were taken out of the node's namespace before that went.
    assert node.netpol_left == []
    assert host_if not in after["links"]
    assert all(cgroup_root.lstrip("/") not in names for names in after["cgroups"].values())
    assert not processes_mentioning(str(workdir))
    # What a snapshot taken now says agrees (nothing came back after the stop).
    assert host_snapshot()["sysctls"] == before["sysctls"]
