"""What ``kaos`` tells a user when something is wrong, against the test cluster's real API
server (its admission, its namespaces) and a real operator: every reason a manifest is
refused for, in the user's field names; ``--wait`` that stops at once on a state no
waiting resolves and names the close name of a missing object; a namespace, a context or
an object that does not exist; a pod that does not answer through its Service. Each with
its exact lines and exit status."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaos_core.crds import API_VERSION

from tests.support.cluster import Cluster
from tests.support.procs import ServiceProcess, console_script

pytestmark = pytest.mark.cluster

KAOS = console_script("kaos")
NOT_CHECKED = "(more rules are checked once these are fixed)"


def kaos(
    cluster: Cluster, *args: str, input: str | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [KAOS, *args],
        capture_output=True,
        text=True,
        env=cluster.env(),
        input=input,
        timeout=timeout,
        check=False,
    )
    assert "Traceback" not in proc.stderr
    return proc


def agent(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "Agent", "metadata": {"name": name}, "spec": spec}


def agents_in(cluster: Cluster, ns: str) -> list[str]:
    out = cluster.kubectl("get", "agents.kaos.tools", "-n", ns, "-o", "name").stdout
    return out.split()


@pytest.mark.parametrize(
    ("spec", "reasons"),
    [
        (
            {
                "modelAPI": "llm",
                "config": {"taskConfig": {"maxToolCalls": 5000}, "memory": {"type": "store"}},
            },
            [
                'spec.config.memory.type: unsupported value "store" (supported: "local", "remote")',
                "spec.config.taskConfig.maxToolCalls: should be less than or equal to 1000 "
                "(got 5000)",
                NOT_CHECKED,
            ],
        ),
        (
            {"modelAPI": "llm", "config": {"memory": {"type": "remote"}}},
            ["spec.config.memory: memory type remote requires memoryStore; type local forbids it"],
        ),
        (
            # Server-side apply names some of these at a time; all of them are shown.
            {
                "modelAPI": "llm",
                "modelz": "x",
                "mcpServers": "tools",
                "config": {"instructions": True, "taskConfig": {"maxToolCalls": "many"}},
            },
            [
                "spec.config.instructions: expected a string, got a boolean",
                "spec.config.taskConfig.maxToolCalls: expected an integer, got a string",
                "spec.mcpServers: expected a list, got a string",
                "spec.modelz: unknown field",
                NOT_CHECKED,
            ],
        ),
        ({"config": {}}, ["spec.modelAPI: required", NOT_CHECKED]),
    ],
    ids=["bounds", "rule", "types", "required"],
)
def test_deploy_shows_every_reason_admission_gives(
    k8s_cluster: Cluster,
    k8s_namespace: str,
    kaos_crds: Path,
    tmp_path: Path,
    spec: dict[str, Any],
    reasons: list[str],
) -> None:
    manifest = tmp_path / "bot.yaml"
    manifest.write_text(yaml.safe_dump(agent("support-bot5", spec)))
    for _ in range(3):  # the API server's own order varies; ours does not
        proc = kaos(k8s_cluster, "agent", "deploy", "-f", str(manifest), "-n", k8s_namespace)
        assert (proc.returncode, proc.stdout) == (1, "")
        assert proc.stderr.splitlines() == [
            "error: Agent support-bot5 is invalid (see: kubectl explain agent):",
            *(f"  {reason}" for reason in reasons),
        ]
    assert agents_in(k8s_cluster, k8s_namespace) == []


def test_a_deploy_from_flags_goes_through_the_same_refusal(
    k8s_cluster: Cluster, k8s_namespace: str, kaos_crds: Path
) -> None:
    proc = kaos(
        k8s_cluster, "mcp", "deploy", "Bad_Name", "--params", "def f(): pass", "-n", k8s_namespace
    )
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.splitlines() == [
        "error: MCPServer Bad_Name is invalid (see: kubectl explain mcpserver):",
        "  metadata.name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
        "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*') (got \"Bad_Name\")",
    ]


def test_a_namespace_context_or_object_that_does_not_exist(
    k8s_cluster: Cluster, k8s_namespace: str, kaos_crds: Path
) -> None:
    ns = k8s_namespace
    missing = kaos(k8s_cluster, "agent", "list", "-n", "nosuchns")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == (
        "error: namespace nosuchns does not exist; list them with: kubectl get namespaces\n"
    )
    assert kaos(k8s_cluster, "agent", "describe", "x", "-n", "nosuchns").stderr == (
        "error: namespace nosuchns does not exist; list them with: kubectl get namespaces\n"
    )
    context = kaos(k8s_cluster, "agent", "list", "--context", "nosuch")
    assert context.returncode == 2
    assert context.stderr == (
        "error: the kubeconfig has no context nosuch (its contexts: kaos-test); list them with: "
        "kubectl config get-contexts\n"
    )
    kaos(k8s_cluster, "modelapi", "deploy", "devmodel-api", "--model", "m", "-n", ns)
    typo = kaos(k8s_cluster, "modelapi", "get", "devmodel-apj", "-n", ns)
    assert (typo.returncode, typo.stdout) == (1, "")
    assert typo.stderr == (
        f"error: modelapi devmodel-apj not found in namespace {ns}; did you mean modelapi "
        "'devmodel-api'? (list them with: kaos modelapi list)\n"
    )
    empty = kaos(k8s_cluster, "agent", "list", "-n", ns)
    assert (empty.returncode, empty.stdout) == (0, f"no agents found in namespace {ns}\n")


def test_wait_stops_at_once_on_a_refused_override(
    k8s_cluster: Cluster, k8s_namespace: str, kaos_operator: ServiceProcess, tmp_path: Path
) -> None:
    ns = k8s_namespace
    assert kaos(k8s_cluster, "modelapi", "deploy", "llm", "--model", "m", "-n", ns).returncode == 0
    manifest = tmp_path / "refused.yaml"
    env = [{"name": "MEMORY_ENDPOINT", "value": "http://elsewhere:8080"}]
    manifest.write_text(
        yaml.safe_dump(agent("refused", {"modelAPI": "llm", "container": {"env": env}}))
    )
    started = time.monotonic()
    proc = kaos(
        k8s_cluster, "agent", "deploy", "-f", str(manifest), "-n", ns, "--wait", "--timeout", "120"
    )
    took = time.monotonic() - started
    assert proc.returncode == 1
    assert proc.stdout == "agent.kaos.tools/refused applied\n"
    message = "spec.container.env: MEMORY_ENDPOINT is reserved for the operator"
    assert proc.stderr.splitlines()[-2:] == [
        f"agent/refused: Failed - Ready: OverrideRefused: {message}",
        f"error: agent refused failed: OverrideRefused: {message}; fix its spec and deploy again "
        "(see: kaos agent describe refused)",
    ]
    assert took < 60, "the wait did not sit out its timeout"

    # The same message, whole, in describe and in the list's HEALTH column.
    described = kaos(k8s_cluster, "agent", "describe", "refused", "-n", ns).stdout
    assert "Health:    Failed (OverrideRefused)" in described.splitlines()
    assert re.search(rf"Ready\s+False\s+OverrideRefused\s+{re.escape(message)}\s", described)
    rows = [
        line.split() for line in kaos(k8s_cluster, "agent", "list", "-n", ns).stdout.splitlines()
    ]
    assert rows[0][6:9] == ["PHASE", "READY", "HEALTH"]
    assert rows[1][:1] + rows[1][6:9] == ["refused", "Failed", "False", "Failed"]


def test_wait_names_the_close_name_of_a_missing_modelapi(
    k8s_cluster: Cluster, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    assert (
        kaos(k8s_cluster, "modelapi", "deploy", "devmodel", "--model", "m", "-n", ns).returncode
        == 0
    )
    started = time.monotonic()
    proc = kaos(k8s_cluster, "agent", "deploy", "typo", "--modelapi", "devmodl", "-n", ns, "--wait")
    took = time.monotonic() - started
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-2:] == [
        "agent/typo: Waiting - DependenciesReady: ModelAPINotFound: ModelAPI devmodl not found",
        f"error: agent typo cannot become Ready: modelapi 'devmodl' does not exist in namespace "
        f"{ns} (did you mean modelapi 'devmodel'?); fix spec.modelAPI and deploy again (see: "
        "kaos agent describe typo)",
    ]
    assert took < 60, "the wait did not sit out its timeout"


def test_an_agent_that_does_not_answer_names_its_pod_and_the_cause(
    k8s_cluster: Cluster, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    """kwok's pods run nothing and forward no port: the error says which pod, where, why."""
    ns = k8s_namespace
    kaos(k8s_cluster, "modelapi", "deploy", "llm", "--model", "m", "-n", ns)
    assert (
        kaos(
            k8s_cluster, "agent", "deploy", "quiet", "--modelapi", "llm", "-n", ns, "--wait"
        ).returncode
        == 0
    )
    pod = (
        k8s_cluster.kubectl(
            "get", "pods", "-n", ns, "-l", "app.kubernetes.io/instance=quiet", "-o", "name"
        )
        .stdout.split()[0]
        .removeprefix("pod/")
    )
    for argv in (
        ["agent", "invoke", "quiet", "hi", "--timeout", "5"],
        ["a2a", "list", "quiet"],
        ["agent", "chat", "quiet"],
    ):
        proc = kaos(k8s_cluster, *argv, "-n", ns, input="hi\n")
        assert proc.returncode == 1
        assert proc.stderr.splitlines()[-1] == (
            f"error: agent quiet did not answer through svc/quiet port 8000 in namespace {ns}: "
            f'no forward found for port 8000 in pod "{ns}/{pod}"; pod {pod} (Running 1/1 '
            "ready); see: kaos agent describe quiet, kaos agent logs quiet"
        ), argv
        assert not re.search(r"127\.0\.0\.1:\d+/|Client\w*Error|Disconnected", proc.stderr)
