"""``kaos memory`` presents the kubeconfig's own Kubernetes identity to a secured memory
service, with no extra step, against the test cluster's real API server.

The real ``kaos`` executable runs with a kubeconfig whose context authenticates with a
ServiceAccount token (bound to the chart's memory admin, or reader, role) and talks to a
real ``kaos-memory`` on loopback (``--url``: nodes are simulated here, nothing listens
behind a Service) that reviews that token with the API server. The admin erases bob
across every agent and session and reads the audit; the reader cannot forget; the test
cluster's own client-certificate kubeconfig gets an error that says why and what to do.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.helm import Helm
from tests.fixtures.memory import MemoryServer
from tests.support.cluster import Cluster
from tests.support.memory_admin import (
    ADMIN,
    READER,
    AdminWorld,
    admin_world,
    remember,
    start_secured_memory,
)
from tests.support.procs import ServiceProcess, console_script

pytestmark = pytest.mark.cluster

KAOS = console_script("kaos")
BOB_LINES = ("I collect zeppelin stamps", "My dog is called Quasimodo")
ALICE_LINES = ("My favourite colour is teal",)


@pytest.fixture(scope="module")
def world(
    k8s_cluster: Cluster, helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AdminWorld]:
    with admin_world(k8s_cluster, helm, tmp_path_factory.mktemp("cli-mem-admin")) as w:
        yield w


@pytest.fixture(scope="module")
def server(world: AdminWorld, devmodel_server: ServiceProcess) -> Iterator[MemoryServer]:
    server = start_secured_memory(world, f"{devmodel_server.url}/v1", world.tmp / "memory")
    try:
        remember(server, world, {"alice": ALICE_LINES, "bob": BOB_LINES})
        yield server
    finally:
        server.proc.kill()


def kaos(kubeconfig: Path, cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = cluster.env()
    env["KUBECONFIG"] = str(kubeconfig)
    proc = subprocess.run(
        [KAOS, *args], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def kaos_json(kubeconfig: Path, cluster: Cluster, *args: str) -> Any:
    proc = kaos(kubeconfig, cluster, *args, "-o", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_admin_context_forgets_bob_and_reads_the_audit(
    world: AdminWorld, server: MemoryServer
) -> None:
    admin = world.kubeconfig_for(ADMIN)
    reader = world.kubeconfig_for(READER)
    bob_turns = [t for t in server.db.turns() if t["principal"] == "bob"]
    assert bob_turns

    # The reader's context lists, but may not forget: the 403 names verb and resource.
    listed = kaos_json(reader, world.cluster, "memory", "list", "--url", server.url,
                       "--level", "store")  # fmt: skip
    assert {f["user_id"] for f in listed["long_term"]["facts"]} >= {"alice", "bob"}
    refused = kaos(reader, world.cluster, "memory", "forget", "--url", server.url,
                   "--principal", "bob")  # fmt: skip
    assert refused.returncode == 1
    assert "403 admin_forbidden" in refused.stderr
    assert "delete memorystores.kaos.tools/data" in refused.stderr
    assert [t for t in server.db.turns() if t["principal"] == "bob"] == bob_turns

    # The admin's context: bob across every agent and session, with a receipt.
    forgotten = kaos_json(admin, world.cluster, "memory", "forget", "--url", server.url,
                          "--principal", "bob")  # fmt: skip
    assert forgotten["forgotten"]["short_term"] == len(bob_turns)
    assert forgotten["forgotten"]["long_term"] > 0 and not forgotten["degraded"]
    assert [t for t in server.db.turns() if t["principal"] == "bob"] == []
    assert [p for p in server.db.vector_payloads() if p.get("user_id") == "bob"] == []
    assert "zeppelin" not in server.db.everything_text()
    assert any(t["principal"] == "alice" for t in server.db.turns())

    audit = kaos_json(admin, world.cluster, "memory", "audit", "--url", server.url)
    (record,) = audit["records"]
    assert record["id"] == forgotten["receipt"]
    assert record["actor"] == {"kind": "admin", "name": world.user(ADMIN), "verified": True}
    assert record["scope"]["principal"] == "bob" and record["scope"]["level"] == "user"
    assert record["forgotten"] == forgotten["forgotten"]
    table = kaos(admin, world.cluster, "memory", "audit", "--url", server.url)
    assert table.returncode == 0 and world.user(ADMIN) in table.stdout
    assert "(unverified)" not in table.stdout


def test_a_client_certificate_context_is_told_why_and_what_to_do(
    world: AdminWorld, server: MemoryServer
) -> None:
    # The test cluster's own kubeconfig authenticates with a client certificate.
    proc = kaos(world.cluster.kubeconfig, world.cluster, "memory", "list", "--url", server.url,
                "--level", "store")  # fmt: skip
    assert proc.returncode == 1
    err = proc.stderr
    assert "401 missing_token" in err
    assert "client certificate" in err and "cannot be presented" in err
    assert "use a context whose user has a token" in err
    assert len(err.strip().splitlines()) == 1
