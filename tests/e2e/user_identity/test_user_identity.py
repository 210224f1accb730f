"""Verified user identity end to end: a real OIDC provider, the real API server, real HTTP.

Ory Hydra (``oidc_provider``, users alice and bob, tokens by the authorization-code flow a
gateway runs) issues the users' tokens; the test cluster's API server issues the agents'
service-account tokens (TokenRequest) and its keys verify them. Two real ``kaos-agent``
processes (a coordinator that delegates to a researcher over A2A) and one real
``kaos-memory`` run with both verifications on, as the operator configures them under
``posture.securityEnabled`` with a ``userIssuer``: the agents also ask Kubernetes RBAC
about every user (``posture.userRbac``, on by default; the chart's agent RBAC applied),
alice is granted both agents, bob the coordinator only. Checked: bob refused 403 at the
researcher with nothing run; alice's token in, alice's principal on every stored turn and
fact of both agents (rows in the database); bob never recalls alice's facts;
``X-Principal`` refused; hostile user tokens each 401/403 with nothing written; a key
rotated at the provider followed without a restart; a token that expires mid-run failing
the delegation with a clear error; the memory service deriving the principal itself.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from kaos_core import wire
from kaos_core.auth import names
from kaos_core.auth.oidc import USER_KEY_REFETCH_INTERVAL
from kaos_operator.desired.security import user_rbac_env
from kaos_operator.settings import Posture

from tests.e2e.user_identity.rbac import agent_grant, applied_agent_rbac, apply, namespace_grant
from tests.e2e.user_identity.world import AgentNamespace
from tests.fixtures.agent import AgentFactory
from tests.fixtures.helm import Helm
from tests.fixtures.memory import MemoryServer, start_memory
from tests.support.cluster import SERVICE_ACCOUNT_ISSUER, Cluster
from tests.support.devmodel import DevModel
from tests.support.jwt_craft import b64url, sign, tampered, unsigned
from tests.support.localstack import model_request
from tests.support.oidc import Provider
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

AUDIENCE = "kaos"
COORDINATOR, RESEARCHER, MEMORY_SA = "coordinator", "researcher", "memory"
DELEGATE: list[dict[str, Any]] = [
    {
        "match": "^please ask b",
        "tool_call": {"name": "delegate_to_b", "arguments": {"message": "remember code 4711"}},
    },
    {"after_tool": "delegate_to_b", "reply": "B said: {result}"},
]
SEARCH: list[dict[str, Any]] = [
    {
        "match": "^Where do I live",
        "tool_call": {"name": "search_memory", "arguments": {"query": "where do I live"}},
    },
    {"after_tool": "search_memory", "reply": "From memory:\n{result}"},
]


@dataclass
class World(AgentNamespace):
    # The chart's ClusterRole letting users talk to agents, bound in ``stack``.
    agent_user_role: str


@dataclass
class Stack:
    world: World
    provider: Provider
    memory: MemoryServer
    coordinator: ServiceProcess
    researcher: ServiceProcess

    def turns(self) -> list[dict[str, Any]]:
        return self.memory.db.turns()


@pytest.fixture(scope="module")
def world(
    k8s_cluster: Cluster, helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    if k8s_cluster.workdir is None:
        pytest.skip("a cluster from KAOS_TEST_KUBECONFIG: its CA file is not here")
    suffix = uuid.uuid4().hex[:6]
    ns = f"user-id-{suffix}"
    k8s_cluster.kubectl("create", "namespace", ns)
    try:
        with applied_agent_rbac(k8s_cluster, helm, f"ui{suffix}", ns) as role:
            for sa in (COORDINATOR, RESEARCHER, MEMORY_SA):
                k8s_cluster.kubectl("create", "serviceaccount", sa, "-n", ns)
            yield World(k8s_cluster, ns, tmp_path_factory.mktemp("user-id"), role)
    finally:
        k8s_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def kubernetes_user(provider: Provider, name: str) -> str:
    """The Kubernetes user a token of ``name`` names by default (the API server's
    ``--oidc-username-prefix`` unset: the issuer and ``#`` before ``sub``)."""
    return f"{provider.issuer}#{name}"


def _user_env(prefix: str, provider: Provider) -> dict[str, object]:
    return {
        f"{prefix}USER_ISSUER": provider.issuer,
        f"{prefix}USER_AUDIENCE": AUDIENCE,
        f"{prefix}USER_CA_FILE": provider.ca_file,
        # No skew tolerated, so the expiry tests need not wait out a leeway.
        f"{prefix}USER_LEEWAY": 0,
    }


@pytest.fixture(scope="module")
def stack(
    world: World,
    oidc_provider: Provider,
    devmodel_server: ServiceProcess,
    module_agent_factory: AgentFactory,
) -> Iterator[Stack]:
    memory = start_memory(
        backend="local",
        root=world.tmp / "memory",
        dsn=None,
        model_base_url=f"{devmodel_server.url}/v1",
        overrides={
            "auth_mode": "jwks",
            "auth_issuer": SERVICE_ACCOUNT_ISSUER,
            "auth_api_server": world.cluster.server,
            "auth_ca_file": world.ca_file,
            "auth_token_file": world.token_file(MEMORY_SA, ""),
            "callers_file": world.callers("memory", COORDINATOR, RESEARCHER),
            "require_agent_identity": True,
            "require_principal": True,
            # A fold after four unfolded turns, so facts appear within a few turns.
            "max_events": 4,
            "user_issuer": oidc_provider.issuer,
            "user_audience": AUDIENCE,
            "user_ca_file": oidc_provider.ca_file,
            "user_leeway": 0,
        },
    )

    def agent(sa: str, callers: tuple[str, ...], **extra: object) -> ServiceProcess:
        return module_agent_factory(
            sa,
            AGENT_IDENTITY=world.identity(sa),
            MEMORY_TYPE="remote",
            MEMORY_ENDPOINT=memory.proc.url,
            MEMORY_TOOLS="true",
            MEMORY_MAX_READ_SCOPE="agent",
            MEMORY_REQUIRE_PRINCIPAL="true",
            MEMORY_REQUIRE_AGENT_IDENTITY="true",
            AGENT_MEMORY_TOKEN_FILE=world.token_file(sa, names.MEMORY_AUDIENCE),
            AGENT_PEER_TOKEN_FILE=world.token_file(sa, names.AGENT_AUDIENCE),
            AGENT_AUTH_MODE="jwks",
            AGENT_AUTH_ISSUER=SERVICE_ACCOUNT_ISSUER,
            AGENT_AUTH_API_SERVER=world.cluster.server,
            AGENT_AUTH_CA_FILE=world.ca_file,
            AGENT_AUTH_TOKEN_FILE=world.token_file(sa, ""),
            AGENT_CALLERS_FILE=world.callers(sa, *callers),
            **_user_env("AGENT_", oidc_provider),
            # Who may talk to the agent, as the operator projects it by default with users.
            **user_rbac_env(Posture(security_enabled=True, user_issuer=oidc_provider.issuer)),
            **extra,
        )

    alice, bob = (kubernetes_user(oidc_provider, name) for name in ("alice", "bob"))
    apply(
        world.cluster,
        [
            namespace_grant(world.ns, world.agent_user_role, alice),
            *agent_grant(world.ns, COORDINATOR, bob),
        ],
    )
    try:
        researcher = agent(RESEARCHER, (COORDINATOR,))
        coordinator = agent(COORDINATOR, (), AGENT_SUB_AGENTS=f"b:{researcher.url}")
        yield Stack(world, oidc_provider, memory, coordinator, researcher)
    finally:
        memory.proc.kill()


@dataclass
class Reply:
    status: int
    doc: dict[str, Any]
    www: str

    @property
    def text(self) -> str:
        return str(self.doc["choices"][0]["message"]["content"])

    @property
    def code(self) -> str:
        return str(self.doc.get("error", {}).get("code", ""))


async def chat(
    agent: ServiceProcess, text: str, token: str | None, session: str, **headers: str
) -> Reply:
    sent = {"X-Session-Id": session, **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    body = {"model": "agent", "messages": [{"role": "user", "content": text}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{agent.url}/v1/chat/completions", json=body, headers=sent) as resp,
    ):
        doc = await resp.json(content_type=None)
        return Reply(resp.status, doc, resp.headers.get("WWW-Authenticate", ""))


def in_session(turn: dict[str, Any], session: str) -> bool:
    """A window row of ``session`` (its key ends with the session's run key)."""
    return str(turn["key"]).endswith(f"|run:{session}")


def _session() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------- alice, end to end


async def test_alices_token_is_the_principal_of_every_turn_of_both_agents(
    stack: Stack, devmodel: DevModel
) -> None:
    alice = stack.provider.token("alice", audience=AUDIENCE).access_token
    session = _session()
    first = await chat(stack.coordinator, "I live in Lisbon.", alice, session)
    assert first.status == 200, first.doc
    devmodel.set_script(DELEGATE)
    delegated = await chat(stack.coordinator, "please ask b", alice, session)
    assert delegated.status == 200, delegated.doc
    assert delegated.text == "B said: Echo: remember code 4711"

    rows = [t for t in stack.turns() if in_session(t, session)]
    by_agent = {t["agent"] for t in rows}
    assert by_agent == {stack.world.identity(COORDINATOR), stack.world.identity(RESEARCHER)}
    assert {t["principal"] for t in rows} == {"alice"}, rows
    assert any(t["content"] == "remember code 4711" for t in rows)


async def test_bob_never_recalls_alices_facts(stack: Stack, devmodel: DevModel) -> None:
    alice = stack.provider.token("alice", audience=AUDIENCE).access_token
    bob = stack.provider.token("bob", audience=AUDIENCE).access_token
    session = _session()
    for text in ("I live in Porto.", "My cat is called Nata.", "I work on Tuesdays."):
        assert (await chat(stack.coordinator, text, alice, session)).status == 200
    # The fold this caused extracts alice's facts, attributed to her (a deadline wait).
    deadline = time.monotonic() + 120
    while True:
        facts = [
            p for p in stack.memory.db.vector_payloads() if p.get("data") == "I live in Porto."
        ]
        if facts:
            break
        assert time.monotonic() < deadline, "alice's facts were never extracted"
        await _poll_pause()
    assert {p.get("user_id") for p in facts} == {"alice"}, facts

    devmodel.set_script(SEARCH)
    as_bob = await chat(stack.coordinator, "Where do I live?", bob, _session())
    assert as_bob.status == 200, as_bob.doc
    assert "Porto" not in as_bob.text and "No matching memories." in as_bob.text
    as_alice = await chat(stack.coordinator, "Where do I live?", alice, _session())
    assert "- I live in Porto." in as_alice.text


async def _poll_pause() -> None:
    await asyncio.sleep(0.25)  # polling interval of a deadline wait, not a synchronisation


async def test_a_verified_user_not_granted_the_agent_is_refused(
    stack: Stack, devmodel: DevModel
) -> None:
    """Deny by default: bob's token is good and he may use the coordinator, but no binding
    lets him use the researcher."""
    bob = stack.provider.token("bob", audience=AUDIENCE).access_token
    before = len(stack.turns())
    reply = await chat(stack.researcher, "hello from bob", bob, _session())
    assert (reply.status, reply.doc["error"]) == (
        403,
        {
            "code": "agent_not_granted",
            "message": f'user "{kubernetes_user(stack.provider, "bob")}" may not create'
            f' agents.kaos.tools/invoke "{RESEARCHER}" in namespace "{stack.world.ns}"'
            " (grant it with kaos agent grant, or a binding of the ClusterRole"
            " <release>-agent-user)",
        },
    )
    status, doc, _ = await a2a(stack.researcher, bob)
    assert (status, doc["error"]["data"]) == (403, {"code": "agent_not_granted"})
    assert len(stack.turns()) == before
    requests = await devmodel.arequests()
    assert model_request(requests, "hello from bob") is None
    assert model_request(requests, "hello over A2A") is None


async def test_x_principal_is_refused_under_this_posture(stack: Stack, devmodel: DevModel) -> None:
    alice = stack.provider.token("alice", audience=AUDIENCE).access_token
    before = len(stack.turns())
    prompt = "hi from a header"
    reply = await chat(stack.coordinator, prompt, alice, _session(), **{"X-Principal": "bob"})
    assert (reply.status, reply.code) == (400, "principal_header_refused"), reply.doc
    assert len(stack.turns()) == before
    assert model_request(await devmodel.arequests(), prompt) is None


async def a2a(agent: ServiceProcess, token: str | None) -> tuple[int, dict[str, Any], str]:
    body = {
        "jsonrpc": "2.0",
        "id": "u1",
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"text": "hello over A2A"}],
            }
        },
    }
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{agent.url}/", json=body, headers=headers) as resp,
    ):
        doc = await resp.json(content_type=None)
        return resp.status, doc, resp.headers.get("WWW-Authenticate", "")


async def test_an_end_user_over_a2a_needs_a_token_too(stack: Stack, devmodel: DevModel) -> None:
    status, doc, www = await a2a(stack.researcher, None)
    assert status == 401 and doc["error"]["data"]["code"] == "missing_user_token", doc
    assert www == 'Bearer realm="kaos.dev/agent"'
    assert model_request(await devmodel.arequests(), "hello over A2A") is None
    alice = stack.provider.token("alice", audience=AUDIENCE).access_token
    status, doc, _ = await a2a(stack.researcher, alice)
    assert status == 200 and doc["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    mine = [t for t in stack.turns() if t["content"] == "hello over A2A"]
    assert [t["principal"] for t in mine] == ["alice"]


# --------------------------------------------------------------------- hostile tokens


def _key_confusion(provider: Provider, token: str) -> str:
    """HS256 keyed with the provider's own public key (PEM), over alice's claims."""
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    jwk = next(k for k in provider.jwks()["keys"] if k.get("kid") == header["kid"])
    public = RSAAlgorithm.from_jwk(json.dumps(jwk))
    pem = public.public_bytes(  # type: ignore[union-attr]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    head = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": header["kid"]}).encode())
    payload = token.split(".")[1]
    mac = hmac.new(pem, f"{head}.{payload}".encode(), hashlib.sha256).digest()
    return f"{head}.{payload}.{b64url(mac)}"


async def test_hostile_user_tokens_are_refused_and_write_nothing(
    stack: Stack, devmodel: DevModel
) -> None:
    provider = stack.provider
    alice = provider.token("alice", audience=AUDIENCE).access_token
    claims = json.loads(base64.urlsafe_b64decode(alice.split(".")[1] + "=="))
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    short = provider.token("alice", audience=AUDIENCE, lifetime=1)
    hostile = {
        "wrong audience": provider.token("alice", audience="kaos-other").access_token,
        "another issuer": sign({**claims, "iss": "https://idp.example.test"}, stranger),
        "another key, same issuer": sign(claims, stranger),
        "alg none": unsigned(alice),
        "key confusion (HS256 with the public key)": _key_confusion(provider, alice),
        "tampered (sub=bob)": tampered(alice, sub="bob"),
        "a service-account token": stack.world.mint(COORDINATOR, AUDIENCE),
        "an ID token (audience is the client)": provider.token("alice", audience=AUDIENCE).id_token,
        # A user the provider calls by the coordinator's own identity: that principal is the
        # one its self-subjected runs use, so it would read and write the agent's memory.
        "a user named like the agent": provider.token(
            stack.world.identity(COORDINATOR), audience=AUDIENCE
        ).access_token,
    }
    expires = json.loads(base64.urlsafe_b64decode(short.access_token.split(".")[1] + "=="))["exp"]
    while time.time() <= expires:  # a deadline on the clock, not a synchronisation
        await _poll_pause()
    hostile["expired"] = short.access_token
    before = len(stack.turns())
    prompt = "hello from a hostile token"
    for name, token in hostile.items():
        reply = await chat(stack.coordinator, prompt, token, _session())
        assert reply.status == 401, (name, reply.doc)
        assert reply.code == "invalid_token", (name, reply.doc)
        assert reply.www.startswith('Bearer realm="kaos.dev/agent", error="invalid_token"')
        assert token not in json.dumps(reply.doc)
    missing = await chat(stack.coordinator, prompt, None, _session())
    assert (missing.status, missing.code) == (401, "missing_user_token")
    assert missing.www == 'Bearer realm="kaos.dev/agent"'
    assert len(stack.turns()) == before, "a refused request wrote something"
    assert model_request(await devmodel.arequests(), prompt) is None, "a refusal reached the model"


async def test_a_token_expiring_mid_run_fails_the_delegation_clearly(
    stack: Stack, devmodel: DevModel
) -> None:
    short = stack.provider.token("alice", audience=AUDIENCE, lifetime=3)
    devmodel.set_script(DELEGATE)
    # The coordinator's first model call outlasts the token: the delegation that follows
    # carries an expired token, which the researcher refuses.
    devmodel.set_faults(delay=4.0, routes=["chat"])
    session = _session()
    reply = await chat(stack.coordinator, "please ask b", short.access_token, session)
    assert reply.status == 200, reply.doc
    assert "expired" in reply.text, reply.text
    researcher = stack.world.identity(RESEARCHER)
    assert not [t for t in stack.turns() if in_session(t, session) and t["agent"] == researcher]
    assert all(t["principal"] == "alice" for t in stack.turns() if in_session(t, session))


# --------------------------------------------------------------------- the memory's own check


async def _write(stack: Stack, headers: dict[str, str]) -> tuple[int, str]:
    token = stack.world.mint(COORDINATOR, names.MEMORY_AUDIENCE)
    body = {"turns": [{"role": "user", "content": "direct"}], "infer": False}
    sent = {wire.AGENT_TOKEN_HEADER: token, "X-Session-Id": _session(), **headers}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{stack.memory.proc.url}/v1/write", json=body, headers=sent) as resp,
    ):
        doc = await resp.json(content_type=None)
        return resp.status, str(doc.get("error", {}).get("code", "")) if resp.status >= 400 else ""


async def test_the_memory_service_derives_the_principal_itself(stack: Stack) -> None:
    alice = stack.provider.token("alice", audience=AUDIENCE).access_token
    bob = stack.provider.token("bob", audience=AUDIENCE).access_token
    user = wire.USER_TOKEN_HEADER
    before = len(stack.turns())
    refusals = {
        "a principal without a token": ({"X-Principal": "alice"}, 403, "principal_not_proven"),
        "bob's token claiming alice": (
            {user: bob, "X-Principal": "alice"},
            403,
            "principal_mismatch",
        ),
        "a forged user token": ({user: tampered(alice, sub="bob")}, 401, "invalid_token"),
        "a user token naming the agent itself": (
            {
                user: stack.provider.token(
                    stack.world.identity(COORDINATOR), audience=AUDIENCE
                ).access_token
            },
            401,
            "invalid_token",
        ),
    }
    for name, (headers, status, code) in refusals.items():
        assert await _write(stack, headers) == (status, code), name
    assert len(stack.turns()) == before
    assert await _write(stack, {user: alice}) == (200, "")
    assert stack.turns()[-1]["principal"] == "alice"
    # Without a user, only the agent itself may be the principal (a self-subjected run).
    own = stack.world.identity(COORDINATOR)
    assert await _write(stack, {"X-Principal": own}) == (200, "")
    assert stack.turns()[-1]["principal"] == own


async def test_a_key_rotated_at_the_provider_is_followed_without_a_restart(
    stack: Stack, devmodel: DevModel
) -> None:
    before = stack.provider.token("alice", audience=AUDIENCE).access_token
    assert (await chat(stack.coordinator, "before", before, _session())).status == 200
    new_kids = stack.provider.rotate_keys(retire_old=True)
    after = stack.provider.token("alice", audience=AUDIENCE).access_token
    header = json.loads(base64.urlsafe_b64decode(after.split(".")[0] + "=="))
    assert header["kid"] == new_kids["hydra.jwt.access-token"]
    # The services fetch the new key set when a token names the new key, at most once per
    # refetch interval (USER_KEY_REFETCH_INTERVAL, 10 s): a deadline wait, no restart.
    deadline = time.monotonic() + 3 * USER_KEY_REFETCH_INTERVAL
    session = _session()
    while True:
        reply = await chat(stack.coordinator, "after the rotation", after, session)
        written = await _write(stack, {wire.USER_TOKEN_HEADER: after})
        if reply.status == 200 and written == (200, ""):
            break
        assert reply.status in (200, 401) and time.monotonic() < deadline, (reply.doc, written)
        await _poll_pause()
    assert stack.turns()[-1]["principal"] == "alice"
    # The retired key verifies nothing any more, after a restart of nothing.
    stale = await chat(stack.coordinator, "before", before, _session())
    assert (stale.status, stale.code) == (401, "invalid_token"), stale.doc
    assert stack.coordinator.alive() and stack.memory.proc.alive()
