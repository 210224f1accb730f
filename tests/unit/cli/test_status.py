"""``kaos system status`` finds an operator that runs in another namespace than ``-n`` and
says where; it stays where it was told when the operator was installed there."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from kaos_cli.kinds import KINDS
from kaos_cli.main import main
from kaos_core.crds.generate import crd_document

from tests.unit.cli.fakes import FakeKubectl, items

LEASES = "leases.coordination.k8s.io"


def lease(namespace: str, holder: str, renewed: datetime) -> dict[str, Any]:
    return {
        "kind": "Lease",
        "metadata": {"name": "kaos-operator", "namespace": namespace},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        },
    }


def operator_deployment(namespace: str) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "kaos-operator", "namespace": namespace},
        "spec": {"replicas": 1},
        "status": {"readyReplicas": 1},
    }


@pytest.fixture
def cluster(kubectl: FakeKubectl) -> FakeKubectl:
    """CRDs installed, no KAOS object, nothing in ``default``."""
    for kind in KINDS:
        kubectl.on("get", "customresourcedefinitions", kind.resource, json_=crd_document(kind.info))
        kubectl.on("get", kind.resource, "-A", json_=items())
    kubectl.on("get", LEASES, "kaos-operator", "-n", "default", stdout="")
    kubectl.on("get", "deployments", "-n", "default", json_=items())
    return kubectl


def test_an_operator_in_another_namespace_is_found_and_named(
    cluster: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(UTC)
    stale = datetime(2020, 1, 1, tzinfo=UTC)
    cluster.on(
        "get",
        LEASES,
        "-A",
        json_=items(lease("old-kaos", "op-old", stale), lease("kaos-system", "op-1", now)),
    )
    cluster.on(
        "get", "deployments", "-n", "kaos-system", json_=items(operator_deployment("kaos-system"))
    )

    assert main(["system", "status", "-n", "default", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    operator = doc["operator"]
    assert (operator["namespace"], operator["asked"], operator["leader"]) == (
        "kaos-system",
        "default",
        "op-1",
    )
    assert operator["deployment"] == {"name": "kaos-operator", "ready": 1, "replicas": 1}
    assert doc["healthy"] is True and doc["problems"] == []

    assert main(["system", "status", "-n", "default"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        "KAOS: healthy",
        "Operator: runs in namespace kaos-system (none in default)",
    ]
    assert lines[2].startswith("Operator: leader op-1 (renewed ")
    assert lines[3] == "  Lease kaos-system/kaos-operator; Deployment: kaos-operator 1/1 ready"


def test_no_operator_anywhere_is_a_problem(
    cluster: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.on("get", LEASES, "-A", json_=items())
    assert main(["system", "status", "-n", "default"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "KAOS: unhealthy"
    assert out[1] == "Operator: leader - (no Lease: no operator has run here)"
    assert out[-1] == "problem: operator not leading: no Lease: no operator has run here"


def test_an_operator_installed_in_the_namespace_is_not_looked_for_elsewhere(
    cluster: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.on("get", "deployments", "-n", "default", json_=items(operator_deployment("default")))
    assert main(["system", "status", "-n", "default", "-o", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["operator"]["namespace"] == "default"
    assert doc["problems"] == ["operator not leading: no Lease: no operator has run here"]
    assert not any(LEASES in call and "-A" in call for call in cluster.calls())


LONG = (
    "MemoryStore memory-local not found; serving with short-term memory only until it is back "
    "(recall and save are skipped, the conversation is kept)"
)


def test_degraded_agents_are_listed_with_their_whole_message(
    cluster: FakeKubectl, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster.on("get", LEASES, "-A", json_=items(lease("kaos-system", "op-1", datetime.now(UTC))))
    cluster.on("get", "deployments", "-n", "kaos-system", json_=items())
    degraded = {
        "kind": "Agent",
        "metadata": {"name": "a1", "namespace": "team"},
        "status": {
            "phase": "Ready",
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "Available"},
                {
                    "type": "MemoryDegraded",
                    "status": "True",
                    "reason": "MemoryStoreNotFound",
                    "message": LONG,
                },
            ],
        },
    }
    cluster.on("get", "agents.kaos.tools", "-A", json_=items(degraded))
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["system", "status", "-n", "default"]) == 1
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    lines = [line.rstrip() for line in out.splitlines()]
    at = lines.index("Degraded agents")
    assert lines[at + 1 : at + 3] == [
        "AGENT    WHY",
        f"team/a1  MemoryDegraded: MemoryStoreNotFound: {LONG}",
    ]
    assert lines[-1] == "problem: agent team/a1 degraded"
    assert "…" not in out
