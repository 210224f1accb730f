"""Who may talk to an agent, decided by Kubernetes RBAC: the real API server, Hydra, real
agents and the real ``kaos`` executable.

The chart's RBAC for ``posture.userRbac`` (``<release>-agent-user`` and the agents'
``<release>-agent-review``, rendered by helm from ``charts/kaos`` with a user issuer,
``userRbac`` left at its default) is applied to the test cluster; two real ``kaos-agent``
processes (a coordinator that delegates to a researcher over A2A) run with ``AGENT_RBAC``
on, their Kubernetes users and groups taken from Hydra's tokens behind the prefix
``oidc:`` (alice is in ``staff``, bob in ``guests``).
Grants are made and withdrawn with ``kaos agent grant|revoke``, read with ``who-can``.
Checked: alice, granted, talks; bob, not granted, gets 403 ``agent_not_granted`` (chat)
and the JSON-RPC error (A2A) with no model call; a group grant; bob refused at the
researcher when the coordinator delegates for him; a revoked binding refused within the
cache time; the CLI's exact lines, exit codes and the objects it writes.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kaos_core.auth import names

from tests.e2e.user_identity.rbac import applied_agent_rbac, apply
from tests.e2e.user_identity.test_user_identity import AUDIENCE, DELEGATE, a2a, chat
from tests.e2e.user_identity.world import AgentNamespace
from tests.fixtures.agent import AgentFactory
from tests.fixtures.helm import Helm
from tests.support.cluster import SERVICE_ACCOUNT_ISSUER, Cluster
from tests.support.devmodel import DevModel
from tests.support.localstack import model_request
from tests.support.oidc import Provider
from tests.support.procs import ServiceProcess, console_script

pytestmark = pytest.mark.cluster

KAOS = console_script("kaos")
COORDINATOR, RESEARCHER = "coordinator", "researcher"
PREFIX = "oidc:"
# Seconds a decision is cached: a revoked binding is refused within this.
CACHE_SECONDS = 2
# What a revocation may take beyond the cache: the RoleBinding's deletion reaching the
# API server's authorizer cache (an informer) and one request.
REVOKE_SLACK = 5.0


@dataclass
class World(AgentNamespace):
    release: str

    @property
    def cluster_role(self) -> str:
        return f"{self.release}-kaos-agent-user"

    def kaos(self, *args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [KAOS, *args, "-n", self.ns],
            capture_output=True,
            text=True,
            env=self.cluster.env(),
            timeout=120,
            check=False,
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    def bindings(self) -> list[dict[str, Any]]:
        out = self.cluster.kubectl("get", "rolebindings", "-n", self.ns, "-o", "json").stdout
        items: list[dict[str, Any]] = json.loads(out)["items"]
        return items


def _agent_object(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kaos.tools/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": {"modelAPI": "none", "model": "devmodel"},
    }


@pytest.fixture(scope="module")
def world(
    k8s_cluster: Cluster, kaos_crds: Path, helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    if k8s_cluster.workdir is None:
        pytest.skip("a cluster from KAOS_TEST_KUBECONFIG: its CA file is not here")
    suffix = uuid.uuid4().hex[:6]
    ns, release = f"user-rbac-{suffix}", f"ur{suffix}"
    k8s_cluster.kubectl("create", "namespace", ns)
    try:
        with applied_agent_rbac(k8s_cluster, helm, release, ns):
            for sa in (COORDINATOR, RESEARCHER):
                k8s_cluster.kubectl("create", "serviceaccount", sa, "-n", ns)
            apply(k8s_cluster, [_agent_object(n) | {"metadata": {"name": n, "namespace": ns}}
                                for n in (COORDINATOR, RESEARCHER)])  # fmt: skip
            yield World(k8s_cluster, ns, tmp_path_factory.mktemp("user-rbac"), release)
    finally:
        k8s_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@dataclass
class Stack:
    world: World
    provider: Provider
    coordinator: ServiceProcess
    researcher: ServiceProcess

    def token(self, user: str) -> str:
        return self.provider.token(user, audience=AUDIENCE).access_token


@pytest.fixture(scope="module")
def stack(
    world: World, oidc_provider: Provider, module_agent_factory: AgentFactory
) -> Iterator[Stack]:
    def agent(sa: str, callers: tuple[str, ...], **extra: object) -> ServiceProcess:
        return module_agent_factory(
            sa,
            AGENT_IDENTITY=world.identity(sa),
            AGENT_PEER_TOKEN_FILE=world.token_file(sa, names.AGENT_AUDIENCE),
            AGENT_AUTH_MODE="jwks",
            AGENT_AUTH_ISSUER=SERVICE_ACCOUNT_ISSUER,
            AGENT_AUTH_API_SERVER=world.cluster.server,
            AGENT_AUTH_CA_FILE=world.ca_file,
            AGENT_AUTH_TOKEN_FILE=world.token_file(sa, ""),
            AGENT_CALLERS_FILE=world.callers(sa, *callers),
            AGENT_USER_ISSUER=oidc_provider.issuer,
            AGENT_USER_AUDIENCE=AUDIENCE,
            AGENT_USER_CA_FILE=oidc_provider.ca_file,
            AGENT_RBAC="true",
            AGENT_RBAC_USERNAME_PREFIX=PREFIX,
            AGENT_RBAC_GROUPS_CLAIM="groups",
            AGENT_RBAC_GROUPS_PREFIX=PREFIX,
            AGENT_RBAC_CACHE_SECONDS=CACHE_SECONDS,
            **extra,
        )

    researcher = agent(RESEARCHER, (COORDINATOR,))
    coordinator = agent(COORDINATOR, (), AGENT_SUB_AGENTS=f"b:{researcher.url}")
    yield Stack(world, oidc_provider, coordinator, researcher)


def _session() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


def _refusal(agent: str, ns: str, user: str) -> str:
    return (
        f'user "{user}" may not create agents.kaos.tools/invoke "{agent}" in namespace "{ns}"'
        " (grant it with kaos agent grant, or a binding of the ClusterRole <release>-agent-user)"
    )


async def _pause() -> None:
    await asyncio.sleep(0.2)  # polling interval of a deadline wait, not a synchronisation


# --------------------------------------------------------------------- users


async def test_alice_granted_talks_and_bob_not_granted_is_refused(
    stack: Stack, devmodel: DevModel
) -> None:
    w = stack.world
    granted = w.kaos("agent", "grant", f"{PREFIX}alice", COORDINATOR)
    assert granted.returncode == 0, granted.stderr
    binding = next(b for b in w.bindings() if b["subjects"][0]["name"] == f"{PREFIX}alice")
    assert granted.stdout == (
        f"user {PREFIX}alice may now talk to agent {COORDINATOR} in namespace {w.ns}"
        f" (rolebinding {binding['metadata']['name']})\n"
    )
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": f"kaos-invoke-{COORDINATOR}",
    }
    again = w.kaos("agent", "grant", f"{PREFIX}alice", COORDINATOR)
    assert (again.returncode, again.stdout) == (
        0,
        f"user {PREFIX}alice may already talk to agent {COORDINATOR} in namespace {w.ns}\n",
    )

    alice = await chat(stack.coordinator, "hello from alice", stack.token("alice"), _session())
    assert alice.status == 200, alice.doc
    assert alice.text == "Echo: hello from alice"

    bob_token = stack.token("bob")
    bob = await chat(stack.coordinator, "hello from bob", bob_token, _session())
    assert (bob.status, bob.doc["error"]) == (
        403,
        {"code": "agent_not_granted", "message": _refusal(COORDINATOR, w.ns, f"{PREFIX}bob")},
    )
    assert bob_token not in json.dumps(bob.doc)
    # Over A2A on ``/``: the JSON-RPC error object, with the refusal's status.
    status, doc, _ = await a2a(stack.coordinator, bob_token)
    assert status == 403
    assert doc["error"] == {
        "code": -32600,
        "message": _refusal(COORDINATOR, w.ns, f"{PREFIX}bob"),
        "data": {"code": "agent_not_granted"},
    }
    requests = await devmodel.arequests()
    assert model_request(requests, "hello from bob") is None
    assert model_request(requests, "hello over A2A") is None


async def test_a_group_grant_lets_its_members_talk(stack: Stack) -> None:
    w = stack.world
    granted = w.kaos("agent", "grant", "--group", f"{PREFIX}staff", RESEARCHER)
    assert granted.returncode == 0, granted.stderr
    assert granted.stdout.startswith(
        f"group {PREFIX}staff may now talk to agent {RESEARCHER} in namespace {w.ns}"
    )
    alice = await chat(stack.researcher, "hi researcher", stack.token("alice"), _session())
    assert alice.status == 200, alice.doc
    bob = await chat(stack.researcher, "hi researcher", stack.token("bob"), _session())
    assert (bob.status, bob.code) == (403, "agent_not_granted")


async def test_a_delegation_for_bob_is_refused_at_the_agent_bob_may_not_use(
    stack: Stack, devmodel: DevModel
) -> None:
    w = stack.world
    for args in (("--group", f"{PREFIX}staff", RESEARCHER), (f"{PREFIX}bob", COORDINATOR),
                 (f"{PREFIX}alice", COORDINATOR)):  # fmt: skip
        assert w.kaos("agent", "grant", *args).returncode == 0
    try:
        devmodel.set_script(DELEGATE)
        # alice may use both: the delegation goes through, as her.
        alice = await chat(stack.coordinator, "please ask b", stack.token("alice"), _session())
        assert alice.text == "B said: Echo: remember code 4711", alice.doc
        # bob may use the coordinator, not the researcher: the researcher refuses him.
        bob = await chat(stack.coordinator, "please ask b", stack.token("bob"), _session())
        assert bob.status == 200, bob.doc
        # The delegation tool's failure, as the coordinator's model saw it.
        failure = json.loads(bob.text.removeprefix("B said: "))
        assert failure == {
            "error": "agent b is unavailable: A2A error -32600: "
            + _refusal(RESEARCHER, w.ns, f"{PREFIX}bob")
        }
    finally:
        w.kaos("agent", "revoke", f"{PREFIX}bob", COORDINATOR)


async def test_a_revoked_binding_is_refused_within_the_cache_time(stack: Stack) -> None:
    w = stack.world
    assert w.kaos("agent", "grant", "--group", f"{PREFIX}staff", RESEARCHER).returncode == 0
    token = stack.token("alice")
    assert (await chat(stack.researcher, "before", token, _session())).status == 200

    revoked = w.kaos("agent", "revoke", "--group", f"{PREFIX}staff", RESEARCHER)
    started = time.monotonic()
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout == (
        f"group {PREFIX}staff may no longer talk to agent {RESEARCHER} in namespace {w.ns}\n"
    )
    assert revoked.stderr == f"other RBAC may still grant it: kaos agent who-can {RESEARCHER}\n"
    while True:
        reply = await chat(stack.researcher, "after", token, _session())
        if reply.status == 403:
            break
        assert reply.status == 200, reply.doc
        assert time.monotonic() - started < CACHE_SECONDS + REVOKE_SLACK, "still served"
        await _pause()
    assert reply.code == "agent_not_granted"

    # Revoking what is not granted is an error that changes nothing.
    before = w.bindings()
    again = w.kaos("agent", "revoke", "--group", f"{PREFIX}staff", RESEARCHER)
    assert again.returncode == 1
    assert again.stderr == (
        f"error: group {PREFIX}staff has no grant on agent {RESEARCHER} in namespace {w.ns}"
        f" (list them with: kaos agent who-can {RESEARCHER})\n"
    )
    assert w.bindings() == before


# --------------------------------------------------------------------- the CLI


def test_who_can_lists_the_grants_and_the_cluster_roles_bindings(stack: Stack) -> None:
    w = stack.world
    assert w.kaos("agent", "grant", f"{PREFIX}alice", COORDINATOR).returncode == 0
    assert w.kaos("agent", "grant", "--group", f"{PREFIX}staff", COORDINATOR).returncode == 0
    w.cluster.kubectl(
        "create", "rolebinding", "everyone-here", "-n", w.ns,
        f"--clusterrole={w.cluster_role}", f"--group={PREFIX}admins",
    )  # fmt: skip
    listed = w.kaos("agent", "who-can", COORDINATOR, "--cluster-role", w.cluster_role)
    assert listed.returncode == 0, listed.stderr
    by_name = {b["subjects"][0]["name"]: b["metadata"]["name"] for b in w.bindings()}
    rows = [
        ("Group", f"{PREFIX}admins", "rolebinding/everyone-here"),
        ("Group", f"{PREFIX}staff", f"rolebinding/{by_name[PREFIX + 'staff']}"),
        ("User", f"{PREFIX}alice", f"rolebinding/{by_name[PREFIX + 'alice']}"),
    ]
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["KIND", "NAME", "BINDING"]
    assert [tuple(line.split()) for line in lines[1:]] == rows
    assert listed.stderr == (
        "other RBAC may also grant create on agents/invoke; ask the API server: kubectl auth"
        f" can-i create agents.kaos.tools/{COORDINATOR} --subresource=invoke --as USER"
        f" -n {w.ns}\n"
    )
    as_json = json.loads(w.kaos("agent", "who-can", COORDINATOR, "--cluster-role",
                                w.cluster_role, "-o", "json").stdout)  # fmt: skip
    assert as_json["agent"] == COORDINATOR and as_json["namespace"] == w.ns
    assert [(s["kind"], s["name"], s["binding"]) for s in as_json["subjects"]] == rows


def test_bad_grants_are_refused_and_write_nothing(world: World) -> None:
    before = world.bindings()
    usage = world.kaos("agent", "grant", f"{PREFIX}alice")
    assert usage.returncode == 2
    assert usage.stderr == (
        "error: usage: kaos agent grant USER AGENT, or kaos agent grant --group GROUP AGENT\n"
    )
    missing = world.kaos("agent", "grant", f"{PREFIX}alice", "nosuchagent")
    assert missing.returncode == 1
    assert missing.stderr.startswith(
        f"error: agent nosuchagent not found in namespace {world.ns}"
    ), missing.stderr
    assert world.bindings() == before
