"""The real ``kaos`` executable against the test cluster with a real operator.

Nodes are simulated by kwok: pods are scheduled and become Ready but run nothing, so a
container's log is the file kwok serves for every pod (``POD_LOG_NAME`` in the cluster's
workdir), and nothing listens behind a Service; talking to an agent (chat, a2a) is proven
against a real ``kaos-agent`` on loopback in ``tests/unit/cli/test_agent_talk.py``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.fixtures.helm import Helm
from tests.support.cluster import POD_LOG_NAME, Cluster
from tests.support.procs import ServiceProcess, console_script

pytestmark = pytest.mark.cluster

KAOS = console_script("kaos")


class Kaos:
    """``kaos`` with the cluster's kubeconfig, in one namespace unless told otherwise."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.env = cluster.env()
        self.namespace = namespace

    def argv(self, *args: str) -> list[str]:
        return (
            [KAOS, *args] if "-n" in args or "-A" in args else [KAOS, *args, "-n", self.namespace]
        )

    def __call__(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = self(*args)
        assert proc.returncode == 0, f"kaos {' '.join(args)}: {proc.stderr}"
        assert "Traceback" not in proc.stderr
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "-o", "json").stdout)


def table(text: str) -> list[dict[str, str]]:
    """A kubectl-style table as rows keyed by header (cells have no spaces here)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    headers = lines[0].split()
    return [dict(zip(headers, ln.split(), strict=False)) for ln in lines[1:]]


def cri_line(text: str) -> str:
    """A container log line as the CRI writes it (and kwok serves it): time, stream, tag."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return f"{stamp} stdout F {text}\n"


def error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


KAOS_KINDS = "agents.kaos.tools,modelapis.kaos.tools,mcpservers.kaos.tools,memorystores.kaos.tools"


@pytest.fixture
def kaos(k8s_cluster: Cluster, k8s_namespace: str, kaos_operator: ServiceProcess) -> Iterator[Kaos]:
    yield Kaos(k8s_cluster, k8s_namespace)
    # Leave no KAOS object in the terminating namespace for a later test's operator that
    # watches every namespace (it would try to record events there).
    k8s_cluster.kubectl(
        "delete", KAOS_KINDS, "--all", "-n", k8s_namespace, "--wait=true", check=False, timeout=120
    )


@pytest.fixture
def volume(k8s_cluster: Cluster, k8s_namespace: str) -> Iterator[None]:
    """A PersistentVolume pre-bound to the MemoryStore ``mem``'s claim (kwok has no
    provisioner); deleted afterwards."""
    name = f"pv-cli-{uuid.uuid4().hex[:8]}"
    pv = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "hostPath": {"path": f"/tmp/{name}"},
            "claimRef": {"namespace": k8s_namespace, "name": "mem-data"},
        },
    }
    k8s_cluster.kubectl("apply", "-f", "-", input=json.dumps(pv))
    yield
    k8s_cluster.kubectl("delete", "pv", name, "--wait=false", check=False)


def test_deploy_wait_list_describe_get_delete_every_kind(kaos: Kaos, volume: None) -> None:
    ns = kaos.namespace
    # A ModelAPI that becomes Ready: --wait shows progress and ends at Ready.
    proc = kaos.ok("modelapi", "deploy", "llm", "--model", "openai/devmodel", "--wait")
    assert "modelapi.kaos.tools/llm" in proc.stdout
    assert proc.stderr.splitlines()[-1] == "modelapi/llm: Ready"

    # An Agent whose MemoryStore does not exist stays Waiting: --wait fails naming it.
    waiting = kaos(
        "agent",
        "deploy",
        "a1",
        "--modelapi",
        "llm",
        "--memorystore",
        "mem",
        "--wait",
        "--timeout",
        "10",
    )
    assert waiting.returncode == 1
    line = error_line(waiting)
    assert line.startswith("error: agent a1 not Ready after 10s: Waiting")
    assert "mem" in line and "MemoryStore" in line
    assert line.endswith("(see: kaos agent describe a1)")
    assert any(ln.startswith("agent/a1: Waiting") for ln in waiting.stderr.splitlines())

    rows = table(kaos.ok("agent", "list").stdout)
    assert [(r["NAME"], r["MODELAPI"], r["PHASE"]) for r in rows] == [("a1", "llm", "Waiting")]
    everywhere = kaos.json("agent", "list", "-A")
    assert [
        (i["metadata"]["namespace"], i["metadata"]["name"])
        for i in everywhere
        if i["metadata"]["namespace"] == ns
    ] == [(ns, "a1")]
    assert "NAMESPACE" in kaos.ok("agent", "list", "-A").stdout.splitlines()[0]
    got = yaml.safe_load(kaos.ok("agent", "get", "a1", "-o", "yaml").stdout)
    memory = got["spec"]["config"]["memory"]  # with the API server's defaults
    assert (memory["type"], memory["memoryStore"]) == ("remote", "mem")
    assert table(kaos.ok("agent", "get", "a1").stdout)[0]["PHASE"] == "Waiting"

    described = kaos.json("agent", "describe", "a1")
    deps = next(c for c in described["conditions"] if c["type"] == "DependenciesReady")
    assert deps["status"] == "False" and deps["reason"] == "MemoryStoreNotFound"
    assert described["owned"] == []
    text = kaos.ok("agent", "describe", "a1").stdout
    for heading in (
        "Phase:     Waiting",
        "Conditions",
        "MemoryStoreNotFound",
        "Owned objects",
        "(none yet)",
        "Events",
    ):
        assert heading in text

    # The store arrives: both become Ready, and the agent's --wait now succeeds.
    kaos.ok("memorystore", "deploy", "mem", "--modelapi", "llm", "--wait")
    proc = kaos.ok("agent", "deploy", "a1", "--modelapi", "llm", "--memorystore", "mem", "--wait")
    assert proc.stderr.splitlines()[-1] == "agent/a1: Ready"
    described = kaos.json("agent", "describe", "a1")
    owned = {(o["kind"], o["name"]): o["ready"] for o in described["owned"]}
    assert owned[("Deployment", "a1")] == "1/1 ready"
    assert ("Service", "a1") in owned
    assert any(kind == "Pod" and state.startswith("Running") for (kind, _), state in owned.items())
    assert any(e["reason"] for e in described["events"]), "phase changes are recorded as events"
    store_rows = table(kaos.ok("memorystore", "list").stdout)
    assert [(r["NAME"], r["STORAGE"], r["PHASE"]) for r in store_rows] == [
        ("mem", "local", "Ready")
    ]

    store = kaos.json("memorystore", "describe", "mem")
    assert store["phase"] == "Ready" and ("PersistentVolumeClaim", "mem-data") in {
        (o["kind"], o["name"]) for o in store["owned"]
    }
    assert kaos.json("memorystore", "get", "mem")["spec"]["storage"]["type"] == "local"
    # logs picks each kind's main container.
    for kind, name, container in (
        ("agent", "a1", "agent"),
        ("memorystore", "mem", "memory"),
        ("modelapi", "llm", "litellm"),
    ):
        logs = kaos.ok(kind, "logs", name, "--tail", "1")
        assert logs.stderr.startswith(f"# {name}-") and f"container {container}" in logs.stderr

    # An MCP server from flags; the -f path for a manifest.
    kaos.ok(
        "mcp",
        "deploy",
        "tools",
        "--params",
        "def shout(t: str) -> str:\n    return t.upper()\n",
        "--wait",
    )
    assert kaos.json("mcp", "get", "tools")["status"]["phase"] == "Ready"
    assert table(kaos.ok("mcp", "list").stdout)[0]["RUNTIME"] == "python-string"
    assert kaos.json("modelapi", "describe", "llm")["phase"] == "Ready"

    # Delete: each kind, and a second delete names what to do.
    for kind, name in (
        ("agent", "a1"),
        ("mcp", "tools"),
        ("memorystore", "mem"),
        ("modelapi", "llm"),
    ):
        assert kaos.ok(kind, "delete", name).stdout == f"{kind}/{name} deleted\n"
    again = kaos("agent", "delete", "a1")
    assert again.returncode == 1
    assert error_line(again) == (
        f"error: agent a1 not found in namespace {ns}; list them with: kaos agent list"
    )
    missing = kaos("modelapi", "describe", "nope")
    assert missing.returncode == 1
    assert "modelapi nope not found" in error_line(missing)
    assert kaos.ok("agent", "list").stdout == f"no agents found in namespace {ns}\n"


def test_agent_tools_falls_back_to_the_spec_when_unreachable(kaos: Kaos) -> None:
    kaos.ok(
        "agent",
        "deploy",
        "helper",
        "--modelapi",
        "llm",
        "--mcp",
        "text-tools",
        "--access",
        "researcher",
    )
    proc = kaos("agent", "tools", "helper", "-o", "json")
    assert proc.returncode == 0, proc.stderr
    assert "tools from its spec" in proc.stderr
    document = json.loads(proc.stdout)
    assert document["from"] == "spec"
    assert [t["source"] for t in document["tools"]] == ["mcp:text-tools", "peer:researcher"]


def test_logs_follow_receives_new_lines(kaos: Kaos, k8s_cluster: Cluster) -> None:
    assert k8s_cluster.workdir is not None
    pod_log = Path(k8s_cluster.workdir) / POD_LOG_NAME
    kaos.ok("mcp", "deploy", "tools", "--params", "def f() -> int:\n    return 1\n", "--wait")
    marker = uuid.uuid4().hex
    with pod_log.open("a") as log:
        log.write(cri_line(f"before {marker}"))
    tail = kaos.ok("mcp", "logs", "tools", "--tail", "1")
    assert tail.stdout == f"before {marker}\n"
    assert tail.stderr.startswith("# tools-") and "container mcp" in tail.stderr

    follower = subprocess.Popen(
        kaos.argv("mcp", "logs", "tools", "-f", "--tail", "0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=kaos.env,
    )
    try:
        assert follower.stdout is not None
        seen = ""
        deadline = time.monotonic() + 60

        def read_until(text: str, write: str | None = None) -> None:
            # Lines written before kubectl attached are not followed: write until one shows.
            nonlocal seen
            while text not in seen:
                assert time.monotonic() < deadline, f"logs -f showed {seen!r}"
                if write is not None:
                    with pod_log.open("a") as log:
                        log.write(cri_line(write))
                ready, _, _ = select.select([follower.stdout], [], [], 2)
                if ready:
                    seen += os.read(follower.stdout.fileno(), 65536).decode()

        read_until(f"after {marker}", write=f"after {marker}")
        with pod_log.open("a") as log:
            log.write(cri_line(f"last {marker}"))
        read_until(f"last {marker}")
        assert f"before {marker}" not in seen
        assert follower.poll() is None, "logs -f keeps following"
    finally:
        follower.terminate()
        follower.wait(timeout=15)


def test_system_status_healthy_and_unhealthy(
    kaos: Kaos, kaos_operator: ServiceProcess, k8s_cluster: Cluster, volume: None
) -> None:
    ns = kaos.namespace
    kaos.ok("modelapi", "deploy", "llm", "--model", "m", "--wait")

    def status() -> dict[str, Any]:
        proc = kaos("system", "status", "--watch-namespace", ns, "-o", "json")
        document: dict[str, Any] = json.loads(proc.stdout)
        assert proc.returncode == (0 if document["healthy"] else 1)
        return document

    doc = status()
    assert doc["healthy"] is True, doc["problems"]
    assert doc["operator"]["leader"] and doc["operator"]["fresh"] is True
    assert doc["operator"]["deployment"] is None  # the test operator runs as a process
    assert {c["crd"]: (c["installed"], c["cli"], c["schema"]) for c in doc["crds"]} == {
        crd: (["v1alpha1"], "v1alpha1", "current")
        for crd in (
            "agents.kaos.tools",
            "modelapis.kaos.tools",
            "mcpservers.kaos.tools",
            "memorystores.kaos.tools",
        )
    }
    assert doc["resources"]["modelapi"] == {"Ready": 1}
    text = kaos.ok("system", "status", "--watch-namespace", ns).stdout
    assert text.startswith("KAOS: healthy")
    assert "Resources by phase" in text and "Ready 1" in text

    # The store of a running agent goes away: the agent is degraded, status exits 1.
    kaos.ok("memorystore", "deploy", "mem", "--modelapi", "llm", "--wait")
    kaos.ok("agent", "deploy", "a1", "--modelapi", "llm", "--memorystore", "mem", "--wait")
    assert status()["healthy"] is True
    kaos.ok("memorystore", "delete", "mem")
    deadline = time.monotonic() + 90
    while not (doc := status())["degradedAgents"]:
        assert time.monotonic() < deadline, f"no degraded agent reported: {doc}"
    assert doc["healthy"] is False
    assert doc["degradedAgents"][0]["agent"] == f"{ns}/a1"
    assert doc["degradedAgents"][0]["why"].startswith("MemoryDegraded: ")
    assert f"agent {ns}/a1 degraded" in doc["problems"]
    text = kaos("system", "status", "--watch-namespace", ns).stdout
    assert "Degraded agents" in text and "KAOS: unhealthy" in text

    # A namespace where no operator leads: unhealthy, exit 1, the reason in the output.
    other = Kaos(k8s_cluster, "default")
    proc = other("system", "status", "--watch-namespace", ns)
    assert proc.returncode == 1
    assert "KAOS: unhealthy" in proc.stdout
    assert "problem: operator not leading: no Lease" in proc.stdout


def test_samples_deploy_list_delete(kaos: Kaos) -> None:
    names = {s["name"] for s in kaos.json("samples", "list")}
    assert {"agents", "mcpserver", "modelapi", "memorystore-local"} <= names
    proc = kaos.ok("samples", "deploy", "mcpserver", "--wait")
    assert "mcpserver.kaos.tools/text-tools applied" in proc.stdout
    applied = kaos.json("samples", "deploy", "modelapi")
    assert applied == {"applied": ["modelapi.kaos.tools/devmodel-api"]}
    assert proc.stderr.splitlines()[-1] == "mcp/text-tools: Ready"
    assert kaos.json("mcp", "get", "text-tools")["spec"]["runtime"] == "python-string"
    deleted = kaos.json("samples", "delete", "mcpserver")
    assert deleted == {"deleted": ["MCPServer/text-tools"]}
    assert kaos.ok("mcp", "list").stdout.startswith("no mcpservers found")


def test_bash_completion_offers_resource_names(kaos: Kaos) -> None:
    kaos.ok("modelapi", "deploy", "alpha-api", "--model", "m")
    kaos.ok("modelapi", "deploy", "beta-api", "--model", "m")
    script = (
        f'eval "$({KAOS} completion bash)"; '
        f"COMP_WORDS=(kaos modelapi describe -n {kaos.namespace} ''); COMP_CWORD=5; "
        '_kaos_completion kaos; printf "%s\\n" "${COMPREPLY[@]}"'
    )
    env = {**kaos.env, "PATH": f"{Path(KAOS).parent}:{kaos.env['PATH']}"}
    proc = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert set(proc.stdout.split()) == {"alpha-api", "beta-api"}


def test_status_reads_the_chart_operators_deployment_and_lease(
    k8s_cluster: Cluster, helm: Helm
) -> None:
    """Installed by ``kaos system install``, the operator's Deployment is found by its
    labels; kwok runs no container, so nobody holds the Lease: status says so, exit 1."""
    release, ns = "kaos-cli-status", f"kaos-cli-status-{uuid.uuid4().hex[:6]}"
    env = {**helm.env(k8s_cluster.env()), "KAOS_HELM": str(helm.binary)}

    def kaos(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KAOS, *argv, "-n", ns],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )

    installed = kaos("system", "install", "--release", release, "--wait", "--timeout", "120s")
    assert installed.returncode == 0, installed.stderr
    try:
        proc = kaos("system", "status", "--lease", "kaos-operator", "-o", "json")
        assert proc.returncode == 1, proc.stderr
        doc = json.loads(proc.stdout)
        assert doc["operator"]["deployment"]["ready"] == 1
        assert doc["operator"]["deployment"]["name"].startswith(release)
        assert doc["problems"][0] == "operator not leading: no Lease: no operator has run here"
    finally:
        assert kaos("system", "uninstall", "--release", release, "--wait").returncode == 0
        k8s_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_talking_to_an_agent_without_a_pod_behind_it_is_one_line(kaos: Kaos) -> None:
    """kwok's pods run nothing, so the port-forward cannot connect: one line, exit 1."""
    kaos.ok("modelapi", "deploy", "llm", "--model", "m")
    kaos.ok("agent", "deploy", "quiet", "--modelapi", "llm", "--wait")
    for argv in (["agent", "invoke", "quiet", "hi", "--timeout", "5"], ["a2a", "list", "quiet"]):
        proc = kaos(*argv)
        assert proc.returncode == 1
        assert error_line(proc).startswith("error: ")
    nothing = kaos("agent", "invoke", "nobody", "hi")
    assert nothing.returncode == 1
    assert "agent nobody not found" in error_line(nothing)


def test_wait_on_a_terminal_shows_progress_and_ends_ready(kaos: Kaos) -> None:
    """On a terminal ``--wait`` runs a spinner and prints each change above it."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        kaos.argv("modelapi", "deploy", "tty-api", "--model", "m", "--wait"),
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env={**kaos.env, "TERM": "xterm"},
    )
    os.close(slave)
    screen = b""
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 120)
            assert ready, f"no output within 120s: {screen!r}"
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the process closed the terminal
                break
            if not chunk:
                break
            screen += chunk
        assert proc.wait(timeout=30) == 0
    finally:
        os.close(master)
    text = screen.decode("utf-8", "replace")
    assert "modelapi.kaos.tools/tty-api applied" in text
    assert "modelapi/tty-api: Ready" in text
    assert "Traceback" not in text
