"""The real ``kaos`` executable against the test cluster with a real operator.

Nodes are simulated by kwok: pods are scheduled and become Ready but run nothing, so a
container's log is the file kwok serves for every pod (``POD_LOG_NAME`` in the cluster's
workdir), and nothing listens behind a Service; talking to an agent (chat, a2a) is proven
against a real ``kaos-agent`` on loopback in ``tests/integration/cli/test_agent_talk.py``.
"""

from __future__ import annotations

import json
import os
import pty
import re
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
from kaos_core.crds import API_VERSION

from tests.fixtures.helm import Helm
from tests.support.cluster import POD_LOG_NAME, Cluster
from tests.support.procs import ServiceProcess, console_script, free_port
from tests.support.shells import zsh_complete

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

    def __call__(
        self, *args: str, timeout: float = 180, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            input=input,
            check=False,
        )

    def ok(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        proc = self(*args, input=input)
        assert proc.returncode == 0, f"kaos {' '.join(args)}: {proc.stderr}"
        assert "Traceback" not in proc.stderr
        return proc

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "-o", "json").stdout)

    def yaml(self, *args: str, input: str | None = None) -> Any:
        return yaml.safe_load(self.ok(*args, "-o", "yaml", input=input).stdout)


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

    # An Agent whose MemoryStore does not exist stays Waiting: --wait gives up on it after
    # its grace, naming the field to fix.
    waiting = kaos("agent", "deploy", "a1", "--modelapi", "llm", "--memorystore", "mem", "--wait")
    assert waiting.returncode == 1
    assert error_line(waiting) == (
        f"error: agent a1 cannot become Ready: memorystore 'mem' does not exist in namespace "
        f"{ns}; fix spec.config.memory.memoryStore and deploy again (see: kaos agent describe a1)"
    )
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
    events = kaos.ok("agent", "describe", "a1").stdout.split("Events\n", 1)[1].splitlines()
    assert events[0].split() == ["LAST", "TYPE", "REASON", "COUNT", "MESSAGE"]
    for event in described["events"]:  # the table shows each event: its type and reason
        pattern = rf"\s{event['type']}\s+{event['reason']}\s"
        assert any(re.search(pattern, line) for line in events[1:]), (event, events)
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
        out = follower.stdout
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
                ready, _, _ = select.select([out], [], [], 2)
                if ready:
                    seen += os.read(out.fileno(), 65536).decode()

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
    # The list says so too: Ready, but its memory is degraded.
    rows = table(kaos.ok("agent", "list").stdout)
    assert [(r["NAME"], r["PHASE"], r["READY"], r["HEALTH"]) for r in rows] == [
        ("a1", "Ready", "True", "Degraded")
    ]

    # Asked in a namespace where no operator runs, status finds the one in the test's
    # namespace and says where it runs.
    other = Kaos(k8s_cluster, "default")
    proc = other("system", "status", "--watch-namespace", ns)
    assert proc.returncode == 1  # the degraded agent
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["KAOS: unhealthy", f"Operator: runs in namespace {ns} (none in default)"]
    assert "operator not leading" not in proc.stdout


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
    k8s_cluster: Cluster, helm: Helm, tmp_path: Path
) -> None:
    """Installed by ``kaos system install``, the operator's Deployment is found by its
    labels; kwok runs no container, so nobody holds the Lease: status says so, exit 1.
    The current context is dead: install, status and uninstall go through ``--context``."""
    release, ns = "kaos-cli-status", f"kaos-cli-status-{uuid.uuid4().hex[:6]}"
    live = kubeconfig_with_a_dead_current_context(k8s_cluster, tmp_path / "kubeconfig")
    env = {**helm.env(live), "KAOS_HELM": str(helm.binary)}

    def kaos(*argv: str, context: str | None = LIVE_CONTEXT) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KAOS, *argv, "-n", ns, *(["--context", context] if context else [])],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )

    nowhere = kaos("system", "install", "--release", release, context=None)
    assert nowhere.returncode == 2
    assert "no Kubernetes cluster reachable" in error_line(nowhere)
    installed = kaos(
        "system", "install", "--release", release, "--wait", "--timeout", "120s", "-o", "yaml"
    )
    assert installed.returncode == 0, installed.stderr
    assert yaml.safe_load(installed.stdout)["release"] == release
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


def manifest(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}


def test_deploy_from_a_file_or_stdin_and_every_output_format(
    kaos: Kaos, tmp_path: Path, volume: None
) -> None:
    """``deploy -f FILE`` applies every document and ``--wait`` waits for each KAOS object;
    ``-f -`` reads stdin; ``--source`` reads the tools from a file. Every command that
    prints a document prints the same one with ``-o yaml`` as with ``-o json``."""
    ns = kaos.namespace
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        yaml.safe_dump_all(
            [
                manifest("ModelAPI", "llm", {"mode": "Proxy", "proxyConfig": {"models": ["m"]}}),
                manifest(
                    "MemoryStore",
                    "mem",
                    {
                        "storage": {"type": "local"},
                        "models": {
                            "summarization": {"modelAPI": "llm"},
                            "embedding": {"modelAPI": "llm"},
                        },
                    },
                ),
            ]
        )
    )
    proc = kaos.ok("modelapi", "deploy", "-f", str(stack), "--wait")
    assert proc.stdout.splitlines() == [
        "modelapi.kaos.tools/llm applied",
        "memorystore.kaos.tools/mem applied",
    ]
    progress = proc.stderr.splitlines()
    assert "modelapi/llm: Ready" in progress and "memorystore/mem: Ready" in progress

    source = tmp_path / "tools.py"
    source.write_text('def shout(text: str) -> str:\n    """Upper."""\n    return text.upper()\n')
    applied = kaos.yaml("mcp", "deploy", "tools", "--source", str(source), "--wait")
    assert applied == {"applied": ["mcpserver.kaos.tools/tools"]}
    assert kaos.json("mcp", "get", "tools")["spec"]["params"] == source.read_text()

    agent = manifest("Agent", "helper", {"modelAPI": "llm", "mcpServers": ["tools"]})
    stdin = kaos.ok(
        "agent", "deploy", "-f", "-", "--wait", "-o", "yaml", input=yaml.safe_dump(agent)
    )
    assert yaml.safe_load(stdin.stdout) == {"applied": ["agent.kaos.tools/helper"]}
    assert stdin.stderr.splitlines()[-1] == "agent/helper: Ready"

    api_rows = table(kaos.ok("modelapi", "list").stdout)
    assert [(r["NAME"], r["MODE"], r["MODELS"], r["PHASE"]) for r in api_rows] == [
        ("llm", "Proxy", "m", "Ready")
    ]
    assert api_rows[0]["ENDPOINT"].startswith("http://llm.")
    assert re.fullmatch(r"\d+[smhd]", api_rows[0]["AGE"])

    for kind, name in (
        ("modelapi", "llm"),
        ("memorystore", "mem"),
        ("mcp", "tools"),
        ("agent", "helper"),
    ):
        listed = kaos.yaml(kind, "list")
        assert [i["metadata"]["name"] for i in listed] == [name]
        assert [i["spec"] for i in listed] == [i["spec"] for i in kaos.json(kind, "list")]
        everywhere = kaos.yaml(kind, "list", "-A")
        assert (ns, name) in {
            (i["metadata"]["namespace"], i["metadata"]["name"]) for i in everywhere
        }
        got = kaos.yaml(kind, "get", name)
        assert got["metadata"]["name"] == name and got["status"]["phase"] == "Ready"
        assert got["spec"] == kaos.json(kind, "get", name)["spec"]
        described = kaos.yaml(kind, "describe", name)
        as_json = kaos.json(kind, "describe", name)
        assert (
            set(described)
            == set(as_json)
            == {
                "kind",
                "name",
                "namespace",
                "phase",
                "message",
                "endpoint",
                "spec",
                "conditions",
                "events",
                "owned",
                "health",
            }
        )
        assert (described["name"], described["phase"]) == (name, "Ready")
        assert described["spec"] == as_json["spec"]
        assert {c["type"] for c in described["conditions"]} == {
            c["type"] for c in as_json["conditions"]
        }
        assert ("Deployment", name) in {(o["kind"], o["name"]) for o in described["owned"]}

    status = kaos("system", "status", "--watch-namespace", ns, "-o", "yaml")
    assert status.returncode == 0, status.stdout
    doc = yaml.safe_load(status.stdout)
    assert doc["healthy"] is True and doc["resources"]["agent"] == {"Ready": 1}
    assert [c["cli"] for c in doc["crds"]] == ["v1alpha1"] * 4
    assert kaos.yaml("samples", "list") == kaos.json("samples", "list")

    for kind, name in (("agent", "helper"), ("mcp", "tools"), ("memorystore", "mem")):
        assert kaos.yaml(kind, "delete", name) == {"deleted": [f"{kind}/{name}"]}
    assert kaos.json("modelapi", "delete", "llm") == {"deleted": ["modelapi/llm"]}
    assert kaos.yaml("agent", "list") == []


def kubeconfig_with_a_dead_current_context(cluster: Cluster, path: Path) -> dict[str, str]:
    """The cluster's kubeconfig plus a context ``nowhere`` (a port nobody listens on) made
    current: only commands that honour ``--context kaos-test`` reach the cluster."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    live = config["current-context"]
    assert live == LIVE_CONTEXT
    user = next(c["context"]["user"] for c in config["contexts"] if c["name"] == live)
    config["clusters"].append(
        {"name": "nowhere", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}
    )
    config["contexts"].append({"name": "nowhere", "context": {"cluster": "nowhere", "user": user}})
    config["current-context"] = "nowhere"
    path.write_text(yaml.safe_dump(config))
    return {**cluster.env(), "KUBECONFIG": str(path)}


LIVE_CONTEXT = "kaos-test"


def test_context_reaches_every_command(kaos: Kaos, k8s_cluster: Cluster, tmp_path: Path) -> None:
    """With a dead current context, each command works through ``--context`` (the cluster
    answers, or only the port-forward to a kwok pod that runs nothing fails, exit 1), and
    without it fails naming the context to check (exit 2)."""
    kaos.env = kubeconfig_with_a_dead_current_context(k8s_cluster, tmp_path / "kubeconfig")
    ns = kaos.namespace
    ctx = ("--context", LIVE_CONTEXT)

    unreachable = kaos("modelapi", "list")
    assert unreachable.returncode == 2
    assert "no Kubernetes cluster reachable through the current context" in error_line(unreachable)
    named = kaos("modelapi", "list", "--context", "nowhere")
    assert named.returncode == 2 and "through context nowhere" in error_line(named)

    kaos.ok("modelapi", "deploy", "llm", "--model", "m", "--wait", *ctx)
    kaos.ok("mcp", "deploy", "tools", "--params", "def f() -> int:\n    return 1\n", *ctx)
    kaos.ok("agent", "deploy", "helper", "--modelapi", "llm", "--mcp", "tools", "--wait", *ctx)
    for kind, name in (("modelapi", "llm"), ("mcp", "tools"), ("agent", "helper")):
        assert [i["metadata"]["name"] for i in kaos.json(kind, "list", *ctx)] == [name]
        assert kaos.json(kind, "list", "-A", *ctx)
        assert kaos.json(kind, "get", name, *ctx)["metadata"]["name"] == name
        assert kaos.json(kind, "describe", name, *ctx)["owned"]
        logs = kaos.ok(kind, "logs", name, "--tail", "1", *ctx)
        assert logs.stderr.startswith(f"# {name}-")
        without = kaos(kind, "get", name)
        assert without.returncode == 2, without.stderr
    tools = kaos("agent", "tools", "helper", "-o", "json", *ctx)
    assert tools.returncode == 0, tools.stderr
    assert json.loads(tools.stdout)["from"] == "spec"

    # Talking to the agent port-forwards through the context: the forward starts, and
    # only the connection to the kwok pod behind it fails (exit 1, not "no cluster").
    for argv in (
        ["agent", "invoke", "helper", "hi", "--timeout", "5"],
        ["agent", "chat", "helper"],
        ["a2a", "send", "helper", "hi"],
        ["a2a", "get", "helper", "t1"],
        ["a2a", "cancel", "helper", "t1"],
        ["a2a", "list", "helper"],
    ):
        through = kaos(*argv, *ctx, input="hi\n")
        assert through.returncode == 1, (argv, through.stderr)
        assert "no Kubernetes cluster reachable" not in error_line(through)
        assert kaos(*argv, input="hi\n").returncode == 2, argv

    applied = kaos.json("samples", "deploy", "mcpserver", *ctx)
    assert applied == {"applied": ["mcpserver.kaos.tools/text-tools"]}
    assert kaos.json("samples", "delete", "mcpserver", *ctx) == {
        "deleted": ["MCPServer/text-tools"]
    }
    assert kaos("samples", "deploy", "mcpserver").returncode == 2

    status = kaos("system", "status", "--watch-namespace", ns, "-o", "json", *ctx)
    assert status.returncode == 0, status.stdout
    assert json.loads(status.stdout)["resources"]["modelapi"] == {"Ready": 1}
    assert kaos("system", "status", "--watch-namespace", ns).returncode == 2

    # Completion reads --context from the command line being completed, in bash and zsh.
    words = ["kaos", "agent", "describe", "--context", LIVE_CONTEXT, "-n", ns, ""]
    env = {**kaos.env, "PATH": f"{Path(KAOS).parent}:{kaos.env['PATH']}"}
    bash = subprocess.run(
        [
            "bash",
            "-c",
            f'eval "$({KAOS} completion bash)"; '
            f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
            '_kaos_completion kaos; printf "%s\\n" "${COMPREPLY[@]}"',
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert bash.returncode == 0, bash.stderr
    assert bash.stdout.split() == ["helper"]
    zsh = zsh_complete(*words, env=kaos.env)
    assert zsh.returncode == 0, zsh.stderr
    assert zsh.stdout.splitlines() == ["registered: _kaos_completion", "helper"]
    contexts = zsh_complete("kaos", "agent", "list", "--context", "", env=kaos.env)
    assert set(contexts.stdout.splitlines()[1:]) == {LIVE_CONTEXT, "nowhere"}

    for kind, name in (("agent", "helper"), ("mcp", "tools"), ("modelapi", "llm")):
        assert kaos.ok(kind, "delete", name, *ctx).stdout == f"{kind}/{name} deleted\n"
