"""Admin access to a secured memory service through Kubernetes RBAC, and audited
cross-user erasure, against the test cluster's real API server.

A real ``kaos-memory`` (``jwks`` mode, as its pod would run it: its namespace's
``default`` ServiceAccount, bound by the chart's ``-memory-review`` ClusterRole) holds the
memory two agents wrote for alice and bob. Administrators are ServiceAccounts whose tokens
(the API server's own audience, like a kubeconfig's) the service reviews with a
TokenReview and authorises with a SubjectAccessReview on ``memorystores/data`` of its
store: bound to the chart's reader role, one recalls and lists but cannot forget; bound
to the admin role, one erases bob across every agent and session; bound to nothing, one
is 403; a bad credential is 401; an unreachable API server is 503. The erasure leaves
nothing of bob in any tier (rows, Mem0 vectors and history) while alice's memory stays,
and its audit record names the admin, the scope and the counts, never the text.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kaos_core.auth.access import KubernetesAccess, ResourceAttributes
from kaos_core.auth.verify import HttpsSource, Unauthenticated
from kaos_core.memory.client import MemoryRequestRejected, MemoryServiceClient

from tests.fixtures.helm import Helm
from tests.fixtures.memory import MemoryServer
from tests.support.cluster import Cluster
from tests.support.memory_admin import (
    ADMIN,
    AGENTS,
    READER,
    STORE,
    UNBOUND,
    AdminWorld,
    admin_world,
    agent_token_file,
    remember,
    start_secured_memory,
)
from tests.support.procs import ServiceProcess, free_port
from tests.support.rawhttp import exchange

pytestmark = pytest.mark.cluster

ALICE_LINES = ("My favourite colour is teal", "I grow tomatoes on my balcony")
BOB_LINES = ("I collect zeppelin stamps", "My dog is called Quasimodo")
BOB_WORDS = ("zeppelin", "Quasimodo")


@pytest.fixture(scope="module")
def world(
    k8s_cluster: Cluster, helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AdminWorld]:
    with admin_world(k8s_cluster, helm, tmp_path_factory.mktemp("mem-admin")) as w:
        yield w


@pytest.fixture(scope="module")
def server(world: AdminWorld, devmodel_server: ServiceProcess) -> Iterator[MemoryServer]:
    server = start_secured_memory(world, f"{devmodel_server.url}/v1", world.tmp / "memory")
    try:
        yield server
    finally:
        server.proc.kill()


def _bob(text: str) -> bool:
    return any(word in text for word in BOB_WORDS)


@pytest.fixture(scope="module")
def remembered(server: MemoryServer, world: AdminWorld) -> MemoryServer:
    remember(server, world, {"alice": ALICE_LINES, "bob": BOB_LINES})
    return server


def _admin(server: MemoryServer, world: AdminWorld, sa: str) -> MemoryServiceClient:
    return MemoryServiceClient(
        server.url, admin_credential=world.mint(sa), failure_mode="strict", timeout=30
    )


def _bob_keys(server: MemoryServer) -> set[str]:
    return {r["key"] for r in server.db.attribution() if r["principal"] == "bob"}


def _counts(server: MemoryServer, principal: str) -> dict[str, int]:
    keys = {r["key"] for r in server.db.attribution() if r["principal"] == principal}
    return {
        "short_term": sum(1 for t in server.db.turns() if t["key"] in keys),
        "medium_term": sum(1 for d in server.db.digests() if d["key"] in keys),
        "long_term": sum(1 for p in server.db.vector_payloads() if p.get("user_id") == principal),
    }


def _audit_rows(server: MemoryServer) -> list[dict[str, Any]]:
    cols = (
        "id", "erasure_id", "at", "actor_kind", "actor", "verified", "level", "principal",
        "agent", "session", "short_term", "medium_term", "long_term",
    )  # fmt: skip
    rows = server.db.relational(f"SELECT {', '.join(cols)} FROM kaos_mem_audit ORDER BY id")
    return [dict(zip(cols, r, strict=True)) for r in rows]


def _snapshot(server: MemoryServer) -> str:
    return json.dumps([server.db.turns(), server.db.attribution(), _audit_rows(server)])


# ------------------------------------------------------------------------- the reader


async def test_the_reader_recalls_and_lists_but_cannot_forget(
    remembered: MemoryServer, world: AdminWorld
) -> None:
    async with _admin(remembered, world, READER) as reader:
        recalled = await reader.recall("user", "stamps", principal="bob", include=["long_term"])
        assert any(_bob(f.text) for f in recalled.long_term.facts), recalled
        listed = await reader.list("store", include=["long_term"])
        assert {f.user_id for f in listed.long_term.facts} >= {"alice", "bob"}
        assert (await reader.audit()).records == []
        before = _snapshot(remembered)
        with pytest.raises(MemoryRequestRejected) as refused:
            await reader.forget("user", principal="bob")
    assert refused.value.status == 403 and refused.value.code == "admin_forbidden"
    message = refused.value.message
    assert world.user(READER) in message
    assert f'delete memorystores.kaos.tools/data "{STORE}" in namespace "{world.ns}"' in message
    assert _snapshot(remembered) == before, "a refused forget changed something"
    assert _counts(remembered, "bob")["long_term"] > 0


async def test_an_unbound_user_is_403_and_a_bad_credential_401(
    remembered: MemoryServer, world: AdminWorld
) -> None:
    async with _admin(remembered, world, UNBOUND) as unbound:
        with pytest.raises(MemoryRequestRejected) as refused:
            await unbound.list("store", include=["long_term"])
    assert refused.value.status == 403, refused.value
    assert f'get memorystores.kaos.tools/data "{STORE}"' in refused.value.message
    assert world.user(UNBOUND) in refused.value.message

    before = _snapshot(remembered)
    for credential in ("Bearer not-a-token", "Bearer " + world.mint(ADMIN)[:-4], "Basic eA=="):
        status, doc, challenges = await _post(
            remembered, "/v1/forget", {"level": "user"},
            {"X-Principal": "bob", "Authorization": credential},
        )  # fmt: skip
        assert status == 401, doc
        code = doc["error"]["code"]
        assert code == ("invalid_request" if credential.startswith("Basic") else "invalid_token")
        assert challenges == [f'Bearer realm="kaos.dev/memory", error="{code}"']
    # Neither credential: both schemes are offered.
    status, doc, challenges = await _post(remembered, "/v1/list", {"level": "store"}, {})
    assert status == 401 and doc["error"]["code"] == "missing_token"
    assert len(challenges) == 2
    assert challenges[0].startswith("KaosAgentToken") and challenges[1].startswith("Bearer")
    assert _snapshot(remembered) == before


async def _post(
    server: MemoryServer, path: str, body: dict[str, Any], headers: dict[str, str]
) -> tuple[int, dict[str, Any], list[str]]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(server.url + path, json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json(), resp.headers.getall("WWW-Authenticate", [])


async def test_admin_calls_write_nothing_and_act_as_no_agent(
    remembered: MemoryServer, world: AdminWorld
) -> None:
    before = _snapshot(remembered)
    bearer = ("Authorization", b"Bearer " + world.mint(ADMIN).encode())
    answer = await exchange(
        remembered.url, "POST", "/v1/write",
        [("Content-Type", b"application/json"), ("X-Session-Id", b"s"), bearer],
        json.dumps({"turns": [{"role": "user", "content": "forged"}]}).encode(),
    )  # fmt: skip
    assert answer.status == 403 and answer.json()["error"]["code"] == "admin_write_forbidden"
    answer = await exchange(
        remembered.url, "POST", "/v1/list",
        [("Content-Type", b"application/json"), bearer,
         ("X-Agent-Identity", world.identity(AGENTS[0]).encode())],
        json.dumps({"level": "agent"}).encode(),
    )  # fmt: skip
    assert answer.status == 403 and answer.json()["error"]["code"] == "admin_agent_forbidden"
    # The audit is the administrators': an agent's call is refused.
    async with MemoryServiceClient(
        remembered.url, token_file=agent_token_file(world, AGENTS[0])
    ) as agent:
        with pytest.raises(MemoryRequestRejected) as refused:
            await agent.audit()
    assert refused.value.status == 403 and refused.value.code == "audit_forbidden"
    assert _snapshot(remembered) == before


# ------------------------------------------------------------------------- the admin


async def test_the_admin_erases_bob_everywhere_with_an_audit_receipt(
    remembered: MemoryServer, world: AdminWorld
) -> None:
    bob_before = _counts(remembered, "bob")
    alice_before = _counts(remembered, "alice")
    assert bob_before["short_term"] > 0 and bob_before["long_term"] > 0
    assert len({r["agent"] for r in remembered.db.attribution() if r["principal"] == "bob"}) == 2
    alice_facts = sorted(
        p["id"] for p in remembered.db.vector_payloads() if p.get("user_id") == "alice"
    )

    async with _admin(remembered, world, ADMIN) as admin:
        # The store's ceiling (agent) binds agents, not an administrator.
        forgotten = await admin.forget("user", principal="bob")
        assert not forgotten.degraded and forgotten.receipt is not None
        assert forgotten.forgotten.model_dump() == bob_before
        audit = await admin.audit()

    # Nothing of bob in any tier: rows, vectors, Mem0's history and message context.
    assert _bob_keys(remembered) == set()
    assert [t for t in remembered.db.turns() if t["principal"] == "bob"] == []
    assert [p for p in remembered.db.vector_payloads() if p.get("user_id") == "bob"] == []
    everything = remembered.db.everything_text()
    for word in BOB_WORDS:
        assert word not in everything, f"{word!r} survived the erasure"
    # Alice's memory is intact.
    assert _counts(remembered, "alice") == alice_before
    assert alice_facts == sorted(
        p["id"] for p in remembered.db.vector_payloads() if p.get("user_id") == "alice"
    )

    # One audit record: who (verified), which scope, the counts; no content.
    (row,) = _audit_rows(remembered)
    assert row["id"] == forgotten.receipt
    assert (row["actor_kind"], row["actor"], bool(row["verified"])) == (
        "admin", world.user(ADMIN), True,
    )  # fmt: skip
    assert (row["level"], row["principal"], row["agent"], row["session"]) == (
        "user", "bob", None, None,
    )  # fmt: skip
    assert {k: row[k] for k in bob_before} == bob_before
    assert not any(_bob(str(v)) for v in row.values())
    (record,) = audit.records
    assert record.id == forgotten.receipt and record.final
    assert record.actor.name == world.user(ADMIN) and record.actor.verified
    assert record.forgotten == forgotten.forgotten


async def test_an_agents_erasure_is_audited_as_that_agent(
    remembered: MemoryServer, world: AdminWorld
) -> None:
    agent = AGENTS[1]
    async with MemoryServiceClient(
        remembered.url, token_file=agent_token_file(world, agent), failure_mode="strict"
    ) as client:
        forgotten = await client.forget("agent", principal="alice")
    assert forgotten.receipt is not None and forgotten.forgotten.short_term > 0
    row = next(r for r in _audit_rows(remembered) if r["id"] == forgotten.receipt)
    assert (row["actor_kind"], row["actor"], bool(row["verified"])) == (
        "agent", world.identity(agent), True,
    )  # fmt: skip
    assert (row["level"], row["principal"], row["agent"]) == (
        "agent", "alice", world.identity(agent),
    )  # fmt: skip
    assert row["short_term"] == forgotten.forgotten.short_term
    assert row["long_term"] == forgotten.forgotten.long_term


# ------------------------------------------------------------------------- no API server


async def test_an_unreachable_api_server_is_503(
    world: AdminWorld, devmodel_server: ServiceProcess, tmp_path: Path
) -> None:
    server = start_secured_memory(
        world,
        f"{devmodel_server.url}/v1",
        tmp_path / "memory",
        api_server=f"https://127.0.0.1:{free_port()}",
    )
    try:
        async with _admin(server, world, ADMIN) as admin:
            with pytest.raises(Exception) as failed:
                await admin.audit()
        assert "503" in str(failed.value) and "auth_unavailable" in str(failed.value)
        assert _audit_rows(server) == []
    finally:
        server.proc.kill()


# ------------------------------------------------------------------------- the cache


async def test_review_answers_are_cached_no_longer_than_the_token_lives(
    world: AdminWorld, tmp_path: Path
) -> None:
    """A revoked credential keeps its cached answer only within the cache window, and
    never past its own expiry: here the window (an hour) outlives the token (10 min)."""
    sa = "short-lived"
    world.cluster.kubectl("create", "serviceaccount", sa, "-n", world.ns)
    world.cluster.kubectl(
        "create", "rolebinding", f"{sa}-memory", "-n", world.ns,
        f"--clusterrole={world.roles}-reader", f"--serviceaccount={world.ns}:{sa}",
    )  # fmt: skip
    token = world.cluster.kubectl(
        "create", "token", sa, "-n", world.ns, "--duration", "10m"
    ).stdout.strip()
    own = tmp_path / "own-token"
    own.write_text(world.mint("default"))
    now = [time.time()]
    access = KubernetesAccess(
        HttpsSource(ca_file=world.ca_file(), token_file=own),
        world.cluster.server,
        cache_seconds=3600,
        clock=lambda: now[0],
    )
    attributes = ResourceAttributes(
        group="kaos.tools", resource="memorystores", subresource="data",
        verb="get", namespace=world.ns, name=STORE,
    )  # fmt: skip
    try:
        user = await access.authenticate(token)
        assert user.username == world.user(sa)
        assert f"system:serviceaccounts:{world.ns}" in user.groups
        assert user.expires_at is not None and user.expires_at - now[0] <= 600 + 5
        assert await access.allowed(user, attributes)
        # Revoked at the API server: the ServiceAccount and its binding are gone.
        world.cluster.kubectl("delete", "rolebinding", f"{sa}-memory", "-n", world.ns)
        world.cluster.kubectl("delete", "serviceaccount", sa, "-n", world.ns)
        await _until_refused(world, own, token)
        now[0] += 300  # within the window and the token's life: the cached answers stand
        assert await access.authenticate(token) == user
        assert await access.allowed(user, attributes)
        now[0] = user.expires_at + 1  # past the token's expiry: asked again, and refused
        with pytest.raises(Unauthenticated):
            await access.authenticate(token)
        assert not await access.allowed(user, attributes)
    finally:
        await access.close()


async def _until_refused(world: AdminWorld, own: Path, token: str) -> None:
    """Wait until the API server itself refuses ``token`` (its own authenticator caches
    an accepted token for a few seconds), asking with no cache of ours."""
    fresh = KubernetesAccess(
        HttpsSource(ca_file=world.ca_file(), token_file=own), world.cluster.server,
        cache_seconds=0,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                await fresh.authenticate(token)
            except Unauthenticated:
                return
            assert time.monotonic() < deadline, "the API server still accepts the token"
            await asyncio.sleep(0.5)  # polling the API server's verdict, with a deadline
    finally:
        await fresh.close()
