"""The chart's and the samples' pods as real containers: each Running and Ready from a
container the node's runtime lists, each holding the security context the chart and the
operator set (checked from inside the process), and the external store serving through
its Service while one of its two replicas is deleted."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest

from tests.e2e.kind.helpers import (
    MEMORY_PORT,
    ROLLOUT_TIMEOUT,
    SUITE_TIMEOUT,
    KindDeployment,
    store_selector,
    token,
    with_memory,
)
from tests.support.cluster import localpath, wait_until

pytestmark = [pytest.mark.kind, pytest.mark.timeout(SUITE_TIMEOUT)]

RELEASE_NAMESPACE = "kaos-system"
# The uid the KAOS images run as (Dockerfile.base) and the chart and the operator set.
KAOS_UID = 65532
EXTERNAL_STORE, EXTERNAL_AGENT = "memory-pgvector", "archivist"
LOCAL_STORE = "memory-local"

# What the process sees, printed as JSON: run with the image's own Python.
INSPECT = """
import errno, json, os
try:
    open("/kaos-write-probe", "w").close()
    os.unlink("/kaos-write-probe")
    root_write = "ok"
except OSError as exc:
    root_write = errno.errorcode.get(exc.errno, str(exc.errno))
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines()
              if ":\\t" in line)
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "root_write": root_write,
                  "no_new_privs": status["NoNewPrivs"].strip(),
                  "cap_eff": status["CapEff"].strip()}))
"""


def _pods(kind: KindDeployment, namespace: str) -> list[dict[str, Any]]:
    proc = kind.kubectl("get", "pods", "--namespace", namespace, "-o", "json")
    items: list[dict[str, Any]] = json.loads(proc.stdout)["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def _kaos_containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in pod["spec"]["containers"] if "/kaos-" in c["image"]]


def test_every_pod_is_a_ready_real_container(kind: KindDeployment) -> None:
    listed = kind.runtime_containers()
    pods = _pods(kind, RELEASE_NAMESPACE) + _pods(kind, kind.namespace)
    names = {p["metadata"]["name"] for p in pods}
    assert any(n.startswith("kaos-operator") for n in names), names
    assert len(pods) >= 8, names  # operator, pgvector, devmodel, LiteLLM, stores, agents, MCP
    for pod in pods:
        name = pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Running", (name, pod["status"])
        statuses = pod["status"]["containerStatuses"]
        assert len(statuses) == len(pod["spec"]["containers"]), name
        for status in statuses:
            assert status["ready"] is True, (name, status)
            assert "running" in status["state"], (name, status)
            runtime, _, cid = status["containerID"].partition("://")
            assert runtime == "containerd" and cid in listed, (name, status["containerID"])


def test_the_kaos_images_run_under_their_id_tags(kind: KindDeployment) -> None:
    """Each KAOS container runs the image the deploy loaded or imported, under the tag that
    names its ID (dev-<12 hex digits>): a rebuilt image gets a new tag, so deploying again
    (a second `make cluster`) rolls it out."""
    pods = _pods(kind, RELEASE_NAMESPACE) + _pods(kind, kind.namespace)
    images = {c["image"] for pod in pods for c in _kaos_containers(pod)}
    assert {ref.rsplit(":", 1)[0].rsplit("/", 1)[1] for ref in images} >= {
        "kaos-operator", "kaos-memory", "kaos-agent"}, images  # fmt: skip
    tags = {ref: ref.rsplit(":", 1)[1] for ref in images}
    assert all(re.fullmatch(r"dev-[0-9a-f]{12}", tag) for tag in tags.values()), tags


def test_the_local_store_claim_is_bound_by_the_storage_provisioner(kind: KindDeployment) -> None:
    """No hand-made volume: the memory-local sample's claim names no class, gets the
    cluster's default one, and Rancher's local-path-provisioner made its volume (kind ships
    it as its `standard` class; the real node runs it behind `local-path`)."""
    claim = kind.get("pvc", f"{LOCAL_STORE}-data")
    assert claim is not None and claim["status"]["phase"] == "Bound", claim
    classes = json.loads(kind.kubectl("get", "storageclasses", "-o", "json").stdout)["items"]
    default = [c["metadata"]["name"] for c in classes
               if (c["metadata"].get("annotations") or {}).get(localpath.DEFAULT_CLASS_ANNOTATION)
               == "true"]  # fmt: skip
    assert default == [claim["spec"]["storageClassName"]], (default, claim["spec"])
    volume = json.loads(kind.kubectl("get", "pv", claim["spec"]["volumeName"], "-o",
                                     "json").stdout)  # fmt: skip
    annotations = volume["metadata"].get("annotations") or {}
    assert annotations.get(localpath.PROVISIONED_BY) == localpath.PROVISIONER, annotations
    assert volume["spec"]["storageClassName"] == claim["spec"]["storageClassName"]
    assert volume["spec"]["claimRef"]["namespace"] == kind.namespace


def test_the_security_context_holds_in_the_kaos_processes(kind: KindDeployment) -> None:
    pods = _pods(kind, RELEASE_NAMESPACE) + _pods(kind, kind.namespace)
    checked = []
    for pod in pods:
        pod_security = pod["spec"].get("securityContext") or {}
        for container in _kaos_containers(pod):
            name = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}/{container['name']}"
            security = container.get("securityContext") or {}
            proc = subprocess.run(
                [kind.kubectl_path, "--kubeconfig", str(kind.kubeconfig), "exec",
                 "--namespace", pod["metadata"]["namespace"], pod["metadata"]["name"],
                 "-c", container["name"], "--", "python", "-c", INSPECT],
                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            assert proc.returncode == 0, (name, proc.stderr)
            seen = json.loads(proc.stdout)
            expected_uid = security.get("runAsUser", pod_security.get("runAsUser", KAOS_UID))
            assert seen["uid"] == expected_uid == KAOS_UID, (name, seen)
            if security.get("readOnlyRootFilesystem"):
                assert seen["root_write"] == "EROFS", (name, seen)
            else:
                # Not read-only, the root directory still belongs to root, not to 65532.
                assert seen["root_write"] in {"EACCES", "EROFS"}, (name, seen)
            if security.get("allowPrivilegeEscalation") is False:
                assert seen["no_new_privs"] == "1", (name, seen)
            if "ALL" in (security.get("capabilities") or {}).get("drop", []):
                assert int(seen["cap_eff"], 16) == 0, (name, seen)
            checked.append(name)
    # The operator, both stores' memory services, the agents and the MCP server.
    assert len(checked) >= 6, checked


RECALL_IN_POD = """
import asyncio, sys
from kaos_core.memory.client import MemoryServiceClient

async def main(url, identity, session, principal, mark):
    async with MemoryServiceClient(url, agent_identity=identity, timeout=20,
                                   failure_mode="strict") as client:
        got = await client.recall("session", mark, session_id=session, principal=principal)
    print(len([t for t in got.short_term.window if mark in t.content]))

asyncio.run(main(*sys.argv[1:]))
"""


def test_the_external_store_serves_through_its_service_while_a_replica_is_deleted(
    kind: KindDeployment,
) -> None:
    mark = token()
    session, principal = f"replicas-{mark}", f"alice-{mark}"
    turns = [("user", f"Keep {mark} through a replica's deletion"), ("assistant", "Kept.")]
    with_memory(
        kind,
        EXTERNAL_STORE,
        EXTERNAL_AGENT,
        lambda m: m.write(turns, session_id=session, principal=principal),
    )
    selector = store_selector(EXTERNAL_STORE)
    ready = kind.get("pods", "-l", selector)
    assert ready is not None and len(ready["items"]) == 2, ready
    victim = ready["items"][0]["metadata"]["name"]
    agent_pods = kind.get(
        "pods", "-l", f"app.kubernetes.io/name=agent,app.kubernetes.io/instance={EXTERNAL_AGENT}"
    )
    assert agent_pods is not None and agent_pods["items"], "no pod of the archivist Agent"
    caller = agent_pods["items"][0]["metadata"]["name"]
    url = f"http://{EXTERNAL_STORE}.{kind.namespace}.svc:{MEMORY_PORT}"

    kind.kubectl("delete", "pod", victim, "--wait=false")
    answers: list[str] = []

    def recall_through_the_service() -> bool:
        # Each call is a new connection to the Service's address, balanced by kube-proxy
        # over the replicas left; every one must answer with the window.
        proc = kind.kubectl(
            "exec", caller, "--", "python", "-c", RECALL_IN_POD, url,
            kind.identity(EXTERNAL_AGENT), session, principal, mark, timeout=60,
        )  # fmt: skip
        answers.append(proc.stdout.strip())
        assert proc.stdout.strip() == "1", proc.stdout
        now = kind.get("pods", "-l", selector)
        assert now is not None
        names = {p["metadata"]["name"] for p in now["items"]}
        replaced = victim not in names and len(names) == 2
        return replaced and all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"]["conditions"])
            for p in now["items"]
        )

    wait_until(recall_through_the_service, timeout=ROLLOUT_TIMEOUT,
               what=f"{victim} replaced while the Service answers")  # fmt: skip
    assert answers and all(a == "1" for a in answers), answers
