"""What the CLI tells the user, line for line, with a stand-in ``kubectl`` that prints what
the real one does: usage, the one ``error:`` prefix and the exit statuses, missing
contexts, kubeconfigs, namespaces and objects, the HEALTH column and its colours."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from kaos_cli.app import error_text
from kaos_cli.commands.describe import OWNED
from kaos_cli.commands.system import _helm_failed
from kaos_cli.main import main

from tests.support.procs import REPO_ROOT
from tests.unit.cli.fakes import FakeKubectl, items

GREEN, YELLOW, RED, RESET = "\x1b[32m", "\x1b[33m", "\x1b[31m", "\x1b[0m"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_kaos_without_a_command_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys)
    assert status == 2 and out == ""
    lines = err.splitlines()
    assert lines[0] == "Usage: kaos [OPTIONS] COMMAND [ARGS]..."
    assert "Commands:" in lines
    assert any(line.split()[:1] == ["agent"] for line in lines)
    assert "error" not in err
    status, _, err = run(capsys, "agent")
    assert status == 2 and err.startswith("Usage: kaos agent [OPTIONS] COMMAND [ARGS]...\n")


def test_a_usage_mistake_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "agent", "lst") == (
        2,
        "",
        "error: No such command 'lst'. Did you mean 'list'? (see: kaos agent --help)\n",
    )


def test_one_error_prefix_whatever_the_tool_said() -> None:
    assert error_text("error: error: boom") == "error: boom"
    assert error_text("Error from server (NotFound): x") == "error: x"
    assert error_text("helm failed: bad\nError: more\n  indented") == (
        "error: helm failed: bad\n  Error: more\n  indented"
    )


NOT_INSTALLED = 'error: the server doesn\'t have a resource type "agents"\n'


def test_no_crds_is_exit_2_without_a_doubled_prefix(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.on("get", "agents.kaos.tools", stderr=NOT_INSTALLED, rc=1)
    assert run(capsys, "agent", "list") == (
        2,
        "",
        'error: the server doesn\'t have a resource type "agents": the KAOS CRDs are not '
        "installed; run: kaos system install\n",
    )


def test_an_unknown_context_is_exit_2_naming_the_known_ones(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    said = "Error in configuration: context was not found for specified context: nosuch\n"
    kubectl.on("--context", "nosuch", stderr=said, rc=1)
    kubectl.on("config", "get-contexts", "-o", "name", stdout="kind-dev\nprod\n")
    assert run(capsys, "agent", "list", "--context", "nosuch") == (
        2,
        "",
        "error: the kubeconfig has no context nosuch (its contexts: kind-dev, prod); list them "
        "with: kubectl config get-contexts\n",
    )


# What kubectl prints when no kubeconfig names a cluster: it dials its default.
NO_CONFIG = (
    'E0101 00:00:00.000000 1 memcache.go:265] "Unhandled Error" err="couldn\'t get current '
    'server API group list: Get \\"http://localhost:8080/api?timeout=32s\\": dial tcp '
    '127.0.0.1:8080: connect: connection refused"\n'
    "The connection to the server localhost:8080 was refused - did you specify the right "
    "host or port?\n"
)


def test_no_kubeconfig_says_no_cluster_is_configured(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    kubectl.on("get", "agents.kaos.tools", stderr=NO_CONFIG, rc=1)
    kubectl.on("config", "current-context", stderr="error: current-context is not set\n", rc=1)
    status, out, err = run(capsys, "agent", "list")
    assert (status, out) == (2, "")
    assert err == (
        "error: no Kubernetes cluster configured: ~/.kube/config names no current context; set "
        "KUBECONFIG to your cluster's kubeconfig, or choose one of its contexts: kubectl "
        "config use-context NAME (or pass --context NAME)\n"
    )
    assert "8080" not in err


def test_a_namespace_that_does_not_exist_is_an_error(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.on("get", "agents.kaos.tools", "-n", "nosuchns", json_=items())
    kubectl.on("get", "namespace", "nosuchns", stdout="")
    assert run(capsys, "agent", "list", "-n", "nosuchns") == (
        1,
        "",
        "error: namespace nosuchns does not exist; list them with: kubectl get namespaces\n",
    )
    kubectl.on("get", "namespace", "team", stdout="namespace/team\n")
    kubectl.on("config", "view", "--minify", stdout="team")
    kubectl.on("get", "agents.kaos.tools", json_=items())
    assert run(capsys, "agent", "list") == (
        0,
        "no agents found in namespace team (the context's namespace)\n",
        "",
    )


def test_not_found_names_the_namespace_and_a_close_name(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.on("config", "view", "--minify", stdout="team")
    kubectl.on("get", "namespace", "team", stdout="namespace/team\n")
    kubectl.on(
        "get",
        "agents.kaos.tools",
        "helpr",
        stderr='Error from server (NotFound): agents.kaos.tools "helpr" not found\n',
        rc=1,
    )
    kubectl.on("get", "agents.kaos.tools", "-o", "name", stdout="agent.kaos.tools/helper\n")
    assert run(capsys, "agent", "describe", "helpr") == (
        1,
        "",
        "error: agent helpr not found in namespace team (the context's namespace); did you "
        "mean agent 'helper'? (list them with: kaos agent list)\n",
    )
    kubectl.on("get", "agents.kaos.tools", "-o", "name", stdout="agent.kaos.tools/zeta\n")
    assert run(capsys, "agent", "get", "helpr")[2] == (
        "error: agent helpr not found in namespace team (the context's namespace); list them "
        "with: kaos agent list\n"
    )


def condition(type_: str, status: str, reason: str, message: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


MEMORY_MESSAGE = (
    "MemoryStore memory-local is not Ready: the agent answers without its long-term memory "
    "until the store is back (recall and save are skipped, the conversation is kept)"
)


def agent(name: str, *conditions: dict[str, str], phase: str = "Ready") -> dict[str, Any]:
    return {
        "apiVersion": "kaos.tools/v1alpha1",
        "kind": "Agent",
        "metadata": {
            "name": name,
            "namespace": "team",
            "generation": 1,
        },
        "spec": {"modelAPI": "llm", "model": "m"},
        "status": {"phase": phase, "observedGeneration": 1, "conditions": list(conditions)},
    }


AGENTS = items(
    agent(
        "remembers",
        condition("Ready", "True", "Available"),
        condition("MemoryDegraded", "True", "MemoryStoreNotReady", MEMORY_MESSAGE),
    ),
    agent("well", condition("Ready", "True", "Available")),
    agent(
        "refused",
        condition("Ready", "False", "OverrideRefused", "MEMORY_ENDPOINT is reserved"),
        phase="Failed",
    ),
)


def test_agent_list_has_a_health_column(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.on("get", "agents.kaos.tools", "-n", "team", json_=AGENTS)
    status, out, _ = run(capsys, "agent", "list", "-n", "team")
    assert status == 0
    assert [line.split() for line in out.splitlines()] == [
        ["NAME", "MODELAPI", "MODEL", "MCP", "MEMORY", "DELEGATES", "PHASE", "READY", "HEALTH",
         "AGE"],
        ["refused", "llm", "m", "-", "local", "-", "Failed", "False", "Failed", "-"],
        ["remembers", "llm", "m", "-", "local", "-", "Ready", "True", "Degraded", "-"],
        ["well", "llm", "m", "-", "local", "-", "Ready", "True", "Ready", "-"],
    ]  # fmt: skip


def test_health_colours_mean_the_same_everywhere(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    kubectl.on("get", "agents.kaos.tools", "-n", "team", json_=AGENTS)
    out = run(capsys, "agent", "list", "-n", "team")[1]
    degraded = next(line for line in out.splitlines() if line.startswith("remembers"))
    assert f"{YELLOW}Degraded" in degraded and f"{GREEN}True" in degraded
    refused = next(line for line in out.splitlines() if line.startswith("refused"))
    assert refused.count(f"{RED}Failed") == 2 and f"{RED}False" in refused


def describe_answers(kubectl: FakeKubectl, obj: dict[str, Any]) -> None:
    name = obj["metadata"]["name"]
    kubectl.on("get", "agents.kaos.tools", name, "-o", "json", json_=obj)
    kubectl.on("get", "events", json_=items())
    kubectl.on("get", OWNED, json_=items())


ANSI = re.compile(r"\x1b\[[0-9;]*m")


def section(out: str, heading: str) -> list[str]:
    """The lines under a heading of ``describe``, up to the next blank line."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if ANSI.sub("", line) == heading)
    rest = lines[at + 1 :]
    return rest[: rest.index("")] if "" in rest else rest


def describe_on_a_terminal(
    kubectl: FakeKubectl,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    columns: int,
) -> str:
    describe_answers(kubectl, AGENTS["items"][0])
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", str(columns))
    status, out, _ = run(capsys, "agent", "describe", "remembers", "-n", "team")
    assert status == 0
    return out


def test_describe_colours_memory_degraded_as_a_warning(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = describe_on_a_terminal(kubectl, capsys, monkeypatch, 200)
    assert f"Health:    {YELLOW}Degraded (MemoryStoreNotReady){RESET}" in out.splitlines()
    rows = section(out, "Conditions")
    memory = next(line for line in rows if line.startswith("MemoryDegraded"))
    assert f"{YELLOW}True  {RESET}" in memory and GREEN not in memory
    ready = next(line for line in rows if line.startswith("Ready"))
    assert f"{GREEN}True  {RESET}" in ready


def test_describe_prints_whole_messages_on_a_wide_terminal(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = describe_on_a_terminal(kubectl, capsys, monkeypatch, 200)
    assert [ANSI.sub("", line).rstrip() for line in section(out, "Conditions")] == [
        "TYPE            STATUS  REASON               MESSAGE" + " " * 141 + "SINCE",
        "Ready           True    Available            -" + " " * 147 + "-",
        "MemoryDegraded  True    MemoryStoreNotReady  MemoryStore memory-local is not Ready: "
        "the agent answers without its long-term memory until the store is back (recall and "
        "save are skipped, the     -",
        " " * 45 + "conversation is kept)",
    ]
    assert "…" not in out


def test_describe_wraps_messages_within_a_narrow_terminal(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = describe_on_a_terminal(kubectl, capsys, monkeypatch, 100)
    pad = " " * 45
    assert [ANSI.sub("", line).rstrip() for line in section(out, "Conditions")] == [
        "TYPE            STATUS  REASON               MESSAGE" + " " * 41 + "SINCE",
        "Ready           True    Available            -" + " " * 47 + "-",
        "MemoryDegraded  True    MemoryStoreNotReady  MemoryStore memory-local is not Ready: "
        "the      -",
        pad + "agent answers without its long-term memory",
        pad + "until the store is back (recall and save are",
        pad + "skipped, the conversation is kept)",
    ]
    assert "…" not in out


def test_describe_on_a_pipe_keeps_each_row_on_one_line(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    describe_answers(kubectl, AGENTS["items"][0])
    out = run(capsys, "agent", "describe", "remembers", "-n", "team")[1]
    rows = out.split("Conditions\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert rows[0].split() == ["TYPE", "STATUS", "REASON", "MESSAGE", "SINCE"]
    assert rows[2].split()[:3] == ["MemoryDegraded", "True", "MemoryStoreNotReady"]
    assert MEMORY_MESSAGE in rows[2]
    assert "\x1b[" not in out


def test_the_exit_statuses_are_documented() -> None:
    text = (REPO_ROOT / "docs" / "cli.md").read_text()
    for line in (
        "| 0 | done |",
        "| 1 | the operation failed: the cluster refused it, an object is missing, not Ready "
        "in time or stuck, a service did not answer, `system status` found a problem |",
        "| 2 | it cannot run here: a usage mistake, a missing tool (kubectl, helm), no "
        "cluster configured or reachable, an unknown context, no KAOS CRDs |",
        "| 130 | interrupted (Ctrl-C) |",
    ):
        assert line in text.splitlines(), line
    assert "pip install kaos-tools" in text
    assert "kaos[" not in text and "pip install kaos\n" not in text


def test_helm_failures_keep_one_prefix() -> None:
    failed = _helm_failed(
        "helm upgrade --install",
        "WARNING: Kubernetes configuration file is group-readable\n"
        "Error: INSTALLATION FAILED: cannot re-use a name that is still in use\n",
    )
    assert error_text(failed.message).splitlines() == [
        "error: helm upgrade --install failed: INSTALLATION FAILED: cannot re-use a name that "
        "is still in use",
        "  WARNING: Kubernetes configuration file is group-readable",
    ]


def test_describe_lists_the_disruption_budget_the_agent_owns(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    obj = AGENTS["items"][0]
    name = obj["metadata"]["name"]
    kubectl.on("get", "agents.kaos.tools", name, "-o", "json", json_=obj)
    kubectl.on("get", "events", json_=items())
    budget = {
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"maxUnavailable": 1},
        "status": {"disruptionsAllowed": 1},
    }
    kubectl.on("get", OWNED, json_=items(budget))
    status, out, _ = run(capsys, "agent", "describe", name, "-n", "team", "-o", "json")
    assert status == 0
    owned = json.loads(out)["owned"]
    assert [(o["kind"], o["ready"]) for o in owned] == [
        ("PodDisruptionBudget", "1 disruptions allowed")
    ]
