"""Talking to an agent through ``kubectl port-forward`` that gets no answer: the error names
the agent, its Service and port, the namespace, the pod and its state, kubectl's cause in
plain words and what to look at, never the client's error on the local port."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_cli.commands.reach import plain_cause
from kaos_cli.main import main

from tests.support.procs import free_port
from tests.unit.cli.fakes import FakeKubectl, items

AGENT = {
    "apiVersion": "kaos.tools/v1alpha1",
    "kind": "Agent",
    "metadata": {"name": "quiet", "namespace": "team"},
    "spec": {"modelAPI": "llm"},
    "status": {"phase": "Ready", "endpoint": "http://quiet.team.svc.cluster.local:8000"},
}


def pod(phase: str, ready: bool) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": "quiet-5d8f9-x2x"},
        "status": {"phase": phase, "containerStatuses": [{"name": "agent", "ready": ready}]},
    }


# What kubectl prints when the pod refuses the forwarded connection.
REFUSED = (
    'E0101 00:00:00.000000 7 portforward.go:424] "Unhandled Error" err="an error occurred '
    "forwarding 45678 -> 8000: error forwarding port 8000 to pod 1f2e, uid : failed to "
    'connect to localhost:8000 inside namespace \\"1f2e\\", IP \\"10.0.0.7\\": connect: '
    'connection refused"\n'
)


def agent_answers(kubectl: FakeKubectl) -> None:
    kubectl.on("get", "agents.kaos.tools", "quiet", "-o", "json", json_=AGENT)
    kubectl.on(
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/name=agent,app.kubernetes.io/instance=quiet",
        json_=items(pod("Running", False)),
    )


def test_a_refused_connection_names_the_pod_and_the_cause(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    agent_answers(kubectl)
    port = free_port()  # nobody listens: the request fails as through a dead forward
    kubectl.on(
        "port-forward",
        "svc/quiet",
        ":8000",
        stdout=f"Forwarding from 127.0.0.1:{port} -> 8000\n",
        stderr=REFUSED,
        hold=True,
    )
    assert main(["agent", "invoke", "quiet", "hi", "-n", "team", "--timeout", "5"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        "error: agent quiet did not answer through svc/quiet port 8000 in namespace team: "
        "nothing accepts connections on port 8000 in the pod (not started, or crashed); pod "
        "quiet-5d8f9-x2x (Running 0/1 ready); see: kaos agent describe quiet, kaos agent "
        "logs quiet\n"
    )
    assert str(port) not in err


def test_a_forward_that_cannot_start_names_the_pod_state(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    agent_answers(kubectl)
    kubectl.on(
        "get",
        "pods",
        "-l",
        "app.kubernetes.io/name=agent,app.kubernetes.io/instance=quiet",
        json_=items(pod("Pending", False)),
    )
    kubectl.on(
        "port-forward",
        stderr="error: unable to forward port because pod is not running. Current status=Pending\n",
        rc=1,
    )
    assert main(["a2a", "list", "quiet", "-n", "team"]) == 1
    assert capsys.readouterr().err == (
        "error: cannot forward to agent quiet (svc/quiet port 8000 in namespace team): unable "
        "to forward port because pod is not running. Current status=Pending; pod "
        "quiet-5d8f9-x2x (Pending 0/1 ready); see: kaos agent describe quiet, kaos agent logs "
        "quiet\n"
    )


def test_a_url_the_user_chose_fails_in_plain_words(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["agent", "invoke", "quiet", "hi", "--url", url, "--timeout", "5"]) == 1
    assert capsys.readouterr().err == f"error: agent at {url} failed: could not connect\n"


@pytest.mark.parametrize(
    ("said", "plain"),
    [
        (None, "the server closed the connection"),
        (
            "an error occurred forwarding 1 -> 8000: error forwarding port 8000 to pod p, uid : "
            "failed to execute portforward in network namespace: read: connection timed out",
            "the pod did not answer in time",
        ),
        (
            "an error occurred forwarding 1 -> 8000: lost connection to pod",
            "lost connection to pod",
        ),
        ("error upgrading connection: pod does not exist", "the pod went away or is not running"),
    ],
)
def test_kubectl_causes_in_plain_words(said: str | None, plain: str) -> None:
    assert plain_cause(said, "the server closed the connection", 8000) == plain
