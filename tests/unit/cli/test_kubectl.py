"""The one kubectl layer: its failures read once and worded for the CLI and the console,
port-forwards on the port kubectl chose (a stand-in ``kubectl`` that prints what the real
one does), and a2a-sdk's errors as the CLI's one line."""

from __future__ import annotations

import asyncio
import stat
from pathlib import Path

import httpx
import pytest
from a2a.client import A2AClientError
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from kaos_cli.clients.a2a import TaskCallRefused, failure_of
from kaos_cli.kubectl.aio import Cluster, ClusterError
from kaos_cli.kubectl.errors import read_failure
from kaos_cli.kubectl.forward import Forwards, announced_port, cause_of, port_forward
from kaos_cli.kubectl.sync import Kube
from kaos_cli.tools import CliError

UNREACHABLE = (
    "E0102 memcache.go:265] couldn't get current server API group list: Get \"https://127.0.0.1"
    ':1/api?timeout=20s": dial tcp 127.0.0.1:1: connect: connection refused\n'
    "The connection to the server 127.0.0.1:1 was refused - did you specify the right host?\n"
)
NOT_INSTALLED = 'error: the server doesn\'t have a resource type "agents"\n'
FORBIDDEN = (
    'Error from server (Forbidden): agents.kaos.tools is forbidden: User "bob" cannot list '
    'resource "agents" in API group "kaos.tools" in the namespace "ns"\n'
)


@pytest.mark.parametrize(
    ("stderr", "problem", "cli", "console"),
    [
        (
            UNREACHABLE,
            "unreachable",
            "no Kubernetes cluster reachable through context dev: dial tcp 127.0.0.1:1: "
            "connect: connection refused (check --context or KUBECONFIG)",
            "the Kubernetes cluster cannot be reached: dial tcp 127.0.0.1:1: connect: "
            "connection refused (check the kubeconfig context, or KUBECONFIG)",
        ),
        (
            NOT_INSTALLED,
            "not-installed",
            'the server doesn\'t have a resource type "agents": the KAOS CRDs are not '
            "installed; run: kaos system install",
            "the KAOS CRDs are not installed (kaos system install)",
        ),
        (
            FORBIDDEN,
            "forbidden",
            'kubectl get agents.kaos.tools: agents.kaos.tools is forbidden: User "bob" cannot '
            'list resource "agents" in API group "kaos.tools" in the namespace "ns"',
            "permission denied: your identity may not list agents.kaos.tools (ask for RBAC: "
            "verb list on agents.kaos.tools)",
        ),
        (
            'Error from server (NotFound): agents.kaos.tools "x" not found\n',
            "not-found",
            'kubectl get agents.kaos.tools: agents.kaos.tools "x" not found',
            "get agents.kaos.tools not found",
        ),
    ],
)
def test_a_failure_is_read_once_and_worded_for_each_front_end(
    stderr: str, problem: str, cli: str, console: str
) -> None:
    assert read_failure(stderr).problem == problem
    kube = Kube(context="dev", namespace="ns", _kubectl="kubectl")
    worded = kube.failed(["get", "agents.kaos.tools"], stderr)
    assert worded.message == cli
    assert worded.exit_code == (2 if problem in ("unreachable", "not-installed") else 1)
    assert ClusterError.of(stderr, "get agents.kaos.tools").message == console


def test_the_forward_port_and_cause_come_from_what_kubectl_prints() -> None:
    assert announced_port("Forwarding from 127.0.0.1:41234 -> 8000\n") == 41234
    assert announced_port("Forwarding from [::1]:41235 -> 8000") == 41235
    assert announced_port("Handling connection for 41234") is None
    klog = (
        'E0102 12:00:00.000000 7 portforward.go:413] "Unhandled Error" err="an error occurred '
        "forwarding 41234 -> 8000: error forwarding port 8000 to pod abc, uid : failed to "
        'connect to localhost:8000 inside namespace \\"abc\\": connection refused"'
    )
    assert cause_of(["Handling connection for 41234\n", klog]) == (
        "an error occurred forwarding 41234 -> 8000: error forwarding port 8000 to pod abc, "
        'uid : failed to connect to localhost:8000 inside namespace "abc": connection refused'
    )
    assert cause_of(["Handling connection for 41234\n"]) is None


def test_a_bare_eof_does_not_hide_the_reason_kubectl_gave() -> None:
    def klog(why: str) -> str:
        return (
            'E0102 12:00:00.000000 7 portforward.go:413] "Unhandled Error" err="an error '
            "occurred forwarding 41234 -> 8000: error forwarding port 8000 to pod abc, "
            f'uid : {why}"'
        )

    reason = 'no forward found for port 8000 in pod \\"ns/abc\\"'
    assert cause_of([klog(reason), klog("EOF")]) == (
        "an error occurred forwarding 41234 -> 8000: error forwarding port 8000 to pod abc, "
        'uid : no forward found for port 8000 in pod "ns/abc"'
    )
    # An EOF alone is still what kubectl said.
    assert cause_of([klog("EOF")]).endswith("uid : EOF")  # type: ignore[union-attr]


def fake_kubectl(tmp_path: Path, script: str) -> str:
    """A ``kubectl`` that records its arguments and then runs ``script`` (sh)."""
    path = tmp_path / "kubectl"
    path.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/argv\n{script}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_port_forward_yields_the_port_kubectl_chose(tmp_path: Path) -> None:
    kubectl = fake_kubectl(
        tmp_path, "echo 'Forwarding from 127.0.0.1:45678 -> 8000'; exec sleep 60"
    )
    with port_forward(kubectl, "ns", "agent-a", 8000, context="dev") as url:
        assert url == "http://127.0.0.1:45678"
    argv = (tmp_path / "argv").read_text().split()
    assert argv == ["--context", "dev", "port-forward", "--address", "127.0.0.1", "-n", "ns",
                    "svc/agent-a", ":8000"]  # fmt: skip


def test_port_forward_that_fails_names_the_service_and_the_cause(tmp_path: Path) -> None:
    kubectl = fake_kubectl(tmp_path, "echo 'error: services \"gone\" not found' >&2; exit 1")
    with pytest.raises(CliError) as failed, port_forward(kubectl, "ns", "gone", 8000):
        pass
    assert failed.value.message == (
        'cannot reach svc/gone in namespace ns: services "gone" not found'
    )


def test_console_forwards_read_the_port_and_name_the_service(tmp_path: Path) -> None:
    async def scenario() -> None:
        ok = Forwards(
            Cluster(
                fake_kubectl(
                    tmp_path, "echo 'Forwarding from 127.0.0.1:45679 -> 8080'; exec sleep 60"
                )
            )
        )
        try:
            assert await ok.url("ns", "mem", 8080) == "http://127.0.0.1:45679"
            assert await ok.url("ns", "mem", 8080) == "http://127.0.0.1:45679"  # held
        finally:
            await ok.close()
        gone = Forwards(Cluster(fake_kubectl(tmp_path, "echo 'error: boom' >&2; exit 1")))
        with pytest.raises(ClusterError) as failed:
            await gone.url("ns", "mem", 8080)
        assert failed.value.message == "kubectl port-forward svc/mem in namespace ns: boom"

    asyncio.run(scenario())


def test_a2a_sdk_errors_become_one_line() -> None:
    url = "http://127.0.0.1:9"
    refused = failure_of(url, "CancelTask", TaskNotCancelableError("task t1 is not cancelable"))
    assert isinstance(refused, TaskCallRefused)
    assert refused.message == "CancelTask refused (-32002): task t1 is not cancelable"
    assert failure_of(url, "GetTask", TaskNotFoundError("no task")).message == (
        "GetTask refused (-32001): no task"
    )
    unmapped = failure_of(url, "GetTask", A2AClientError("JSON-RPC Error -32050: odd"))
    assert unmapped.message == "GetTask refused (-32050): odd"
    response = httpx.Response(401, request=httpx.Request("POST", url))
    status = httpx.HTTPStatusError("refused", request=response.request, response=response)
    try:
        raise A2AClientError("HTTP Error 401") from status
    except A2AClientError as exc:
        assert (
            failure_of(url, "ListTasks", exc).message == f"agent at {url} answered 401 to ListTasks"
        )
    try:
        raise A2AClientError("Network communication error") from httpx.ConnectError("refused")
    except A2AClientError as exc:
        assert failure_of(url, "SendMessage", exc).message == (
            f"agent at {url} failed: could not connect"
        )
