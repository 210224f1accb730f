"""Verified agent identity between agents, against the test cluster's real issuer.

A real callee ``kaos-agent`` runs in ``jwks`` mode (keys from the API server's
``/openid/v1/jwks``, fetched with its own token) and in ``tokenreview`` mode (the API
server's TokenReview, allowed by the chart's own ``<release>-tokenreview`` binding,
rendered with helm and applied) with a callers file that lists one ServiceAccount
(``caller-a``). Callers present TokenRequest tokens (``kubectl create
token --audience kaos.dev/agent``) over A2A and chat completions; forgeries with chosen
claims are signed with the cluster's own service-account key. Every refusal is checked
for its status, its error shape, and for having reached no model. Last, a real caller
``kaos-agent`` with ``AGENT_PEER_TOKEN_FILE`` delegates to the callee through a
scripted ``delegate_to_b`` tool call.
"""

from __future__ import annotations

import base64
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from kaos_core import wire
from kaos_core.auth import names
from multidict import CIMultiDict

from tests.fixtures.agent import AgentFactory
from tests.fixtures.helm import CHART_DIR
from tests.support.cluster import SERVICE_ACCOUNT_ISSUER, Cluster
from tests.support.devmodel import DevModel
from tests.support.jwt_craft import b64url_decode, sign, tampered, unsigned
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

CALLER_A, CALLER_B, CALLEE = "caller-a", "caller-b", "callee"
MODES = ("jwks", "tokenreview")
DELEGATE_SCRIPT: list[dict[str, Any]] = [
    {
        "match": "ask b",
        "tool_call": {"name": "delegate_to_b", "arguments": {"message": "remember code 4711"}},
    },
    {"after_tool": "delegate_to_b", "reply": "B said: {result}"},
]


@dataclass
class World:
    cluster: Cluster
    ns: str
    tmp: Path
    sa_key: RSAPrivateKey | None

    def identity(self, sa: str) -> str:
        return f"kaos://agent/{self.ns}/{sa}"

    def mint(self, sa: str, *, audience: str = names.AGENT_AUDIENCE) -> str:
        args = ["create", "token", sa, "-n", self.ns, "--duration", "10m"]
        if audience:
            args += ["--audience", audience]
        return self.cluster.kubectl(*args).stdout.strip()

    def resign(self, token: str, **changes: Any) -> str:
        if self.sa_key is None:
            pytest.skip("a cluster from KAOS_TEST_KUBECONFIG: its signing key is not here")
        claims = json.loads(b64url_decode(token.split(".")[1]))
        claims.update(changes)
        return sign(claims, self.sa_key)

    def write_callers(self, *sas: str) -> None:
        """Replace the callee's callers file atomically, as kubelet swaps a ConfigMap."""
        doc = {
            "callers": [
                {"identity": self.identity(sa), "namespace": self.ns, "serviceAccount": sa}
                for sa in sas
            ]
        }
        staged = self.tmp / "callers.json.new"
        staged.write_text(json.dumps(doc))
        os.replace(staged, self.callers)

    @property
    def callers(self) -> Path:
        return self.tmp / "callers.json"


def _ca_file(cluster: Cluster, tmp: Path) -> Path:
    if cluster.workdir is not None:
        return cluster.workdir / "pki" / "ca.crt"
    raw = cluster.kubectl(
        "config", "view", "--raw", "--minify", "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ).stdout  # fmt: skip
    path = tmp / "ca.crt"
    path.write_bytes(base64.b64decode(raw))
    return path


@pytest.fixture(scope="module")
def world(k8s_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    ns = f"agent-auth-{uuid.uuid4().hex[:6]}"
    sa_key = None
    if k8s_cluster.workdir is not None:
        key_file = k8s_cluster.workdir / "pki" / "sa.key"
        loaded = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
        assert isinstance(loaded, RSAPrivateKey)
        sa_key = loaded
    k8s_cluster.kubectl("create", "namespace", ns)
    try:
        for sa in (CALLER_A, CALLER_B, CALLEE):
            k8s_cluster.kubectl("create", "serviceaccount", sa, "-n", ns)
        yield World(k8s_cluster, ns, tmp_path_factory.mktemp("agent-auth"), sa_key)
    finally:
        k8s_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def tokenreview_rbac(world: World) -> list[dict[str, Any]]:
    """The chart's TokenReview ClusterRole and the binding for the world's namespace."""
    rendered = world.cluster.run_helm(
        "template", f"tr-{world.ns}", str(CHART_DIR),
        "--set", "posture.securityEnabled=true",
        "--set", "posture.tokenVerification=tokenreview",
        "--set", f"posture.tokenReviewNamespaces={{{world.ns}}}",
        "--show-only", "templates/operator-rbac.yaml",
    ).stdout  # fmt: skip
    objects = [o for o in yaml.safe_load_all(rendered) if o]
    chosen = [o for o in objects if o["metadata"]["name"].endswith(("-tokenreview", world.ns))]
    assert {o["kind"] for o in chosen} == {"ClusterRole", "ClusterRoleBinding"}, chosen
    return chosen


@pytest.fixture(scope="module", params=MODES)
def callee(
    request: pytest.FixtureRequest, world: World, module_agent_factory: AgentFactory
) -> Iterator[ServiceProcess]:
    mode = str(request.param)
    rbac = tokenreview_rbac(world) if mode == "tokenreview" else []
    manifest = yaml.safe_dump_all(rbac)
    if rbac:
        world.cluster.kubectl("apply", "-f", "-", input=manifest)
    # Its own token (the API server's audience), as the operator projects it.
    own = world.tmp / f"own-token-{mode}"
    own.write_text(world.mint(CALLEE, audience=""))
    world.write_callers(CALLER_A)
    try:
        yield module_agent_factory(
            f"callee-{mode}",
            AGENT_AUTH_MODE=mode,
            AGENT_AUTH_ISSUER=SERVICE_ACCOUNT_ISSUER,
            AGENT_AUTH_API_SERVER=world.cluster.server,
            AGENT_AUTH_CA_FILE=_ca_file(world.cluster, world.tmp),
            AGENT_AUTH_TOKEN_FILE=own,
            AGENT_CALLERS_FILE=world.callers,
        )
    finally:
        if rbac:
            world.cluster.kubectl("delete", "-f", "-", input=manifest, check=False)


@dataclass
class Reply:
    status: int
    doc: dict[str, Any]
    challenge: str


async def a2a(agent: ServiceProcess, headers: dict[str, str], *, depth: int = 1) -> Reply:
    body = {
        "jsonrpc": "2.0",
        "id": "r1",
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": uuid.uuid4().hex,
                "role": "ROLE_USER",
                "parts": [{"text": "hello callee"}],
                "metadata": {"kaos": {"delegationDepth": depth}},
            }
        },
    }
    async with (
        aiohttp.ClientSession() as http,
        http.post(agent.url + "/", json=body, headers=headers) as resp,
    ):
        doc = await resp.json(content_type=None)
        return Reply(resp.status, doc, resp.headers.get("WWW-Authenticate", ""))


async def chat(agent: ServiceProcess, headers: dict[str, str], text: str = "hello callee") -> Reply:
    body = {"model": "callee", "messages": [{"role": "user", "content": text}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(agent.url + "/v1/chat/completions", json=body, headers=headers) as resp,
    ):
        doc = await resp.json(content_type=None)
        return Reply(resp.status, doc, resp.headers.get("WWW-Authenticate", ""))


def callee_calls(devmodel: DevModel, *markers: str) -> int:
    """The model calls this module's requests caused (a message holds one of ``markers``):
    other suites' services that share the session's model server (a memory service folding
    in the background) are not counted."""
    wanted = markers or ("hello callee",)
    return sum(
        any(w in str(m.get("content", "")) for m in r.get("messages", []) for w in wanted)
        for r in devmodel.requests()
    )


def token(value: str, *, depth: int = 1) -> dict[str, str]:
    return {wire.AGENT_TOKEN_HEADER: value, "X-KAOS-Delegation-Depth": str(depth)}


async def refused_both(
    callee: ServiceProcess, devmodel: DevModel, headers: dict[str, str], status: int, code: str
) -> None:
    """Refused over A2A (JSON-RPC error, the HTTP status) and chat, reaching no model."""
    before = callee_calls(devmodel)
    over_a2a = await a2a(callee, headers)
    assert over_a2a.status == status, over_a2a.doc
    assert over_a2a.doc["jsonrpc"] == "2.0" and over_a2a.doc["id"] == "r1"
    assert "result" not in over_a2a.doc
    assert over_a2a.doc["error"]["data"]["code"] == code, over_a2a.doc
    over_chat = await chat(callee, headers)
    assert over_chat.status == status, over_chat.doc
    assert over_chat.doc["error"]["code"] == code, over_chat.doc
    for reply in (over_a2a, over_chat):
        if status == 401:
            assert 'realm="kaos.dev/agent"' in reply.challenge
            assert f'error="{code}"' in reply.challenge
        else:
            assert reply.challenge == ""
    assert callee_calls(devmodel) == before, "a refused call reached the model"


# --------------------------------------------------------------------- granted


async def test_a_listed_caller_is_served_over_a2a_and_chat(
    callee: ServiceProcess, world: World, devmodel: DevModel
) -> None:
    headers = token(world.mint(CALLER_A))
    over_a2a = await a2a(callee, headers)
    assert over_a2a.status == 200, over_a2a.doc
    task = over_a2a.doc["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    over_chat = await chat(callee, {**headers, "X-Agent-Identity": world.identity(CALLER_A)})
    assert over_chat.status == 200, over_chat.doc
    assert over_chat.doc["choices"][0]["message"]["content"] == "Echo: hello callee"
    assert callee_calls(devmodel) == 2


async def test_an_end_users_call_proceeds_unverified(
    callee: ServiceProcess, devmodel: DevModel
) -> None:
    # No token and no delegation claim: an end user.
    assert (await chat(callee, {"X-Principal": "alice"})).status == 200
    assert (await a2a(callee, {}, depth=0)).status == 200
    assert callee_calls(devmodel) == 2


# --------------------------------------------------------------------- refused


async def test_a_caller_not_listed_is_403(
    callee: ServiceProcess, world: World, devmodel: DevModel
) -> None:
    await refused_both(callee, devmodel, token(world.mint(CALLER_B)), 403, "caller_not_allowed")


async def test_a_differing_identity_header_is_403(
    callee: ServiceProcess, world: World, devmodel: DevModel
) -> None:
    headers = {**token(world.mint(CALLER_A)), "X-Agent-Identity": world.identity(CALLER_B)}
    await refused_both(callee, devmodel, headers, 403, "identity_mismatch")


async def test_a_delegation_claim_without_a_token_is_401(
    callee: ServiceProcess, world: World, devmodel: DevModel
) -> None:
    claim = {"X-Agent-Identity": world.identity(CALLER_A)}
    await refused_both(callee, devmodel, claim, 401, "missing_token")
    # A depth above 0 alone is a claim too (A2A: the metadata; chat: the header).
    before = callee_calls(devmodel)
    assert (await a2a(callee, {}, depth=1)).status == 401
    assert (await chat(callee, {"X-KAOS-Delegation-Depth": "2"})).status == 401
    assert callee_calls(devmodel) == before


async def test_a_memory_audience_token_is_401(
    callee: ServiceProcess, world: World, devmodel: DevModel
) -> None:
    memory_token = world.mint(CALLER_A, audience=names.MEMORY_AUDIENCE)
    await refused_both(callee, devmodel, token(memory_token), 401, "invalid_token")


async def test_expired_and_forged_tokens_are_401(
    callee: ServiceProcess, world: World, devmodel: DevModel
) -> None:
    real = world.mint(CALLER_A)
    forged = {
        "alg-none": unsigned(real),
        "tampered": tampered(real, sub=f"system:serviceaccount:{world.ns}:{CALLER_B}"),
        # Within KAOS_HTTP_MAX_HEADER_BYTES: the verifier refuses it by its size.
        "64 KiB": "a" * 65536,
    }
    if world.sa_key is not None:
        now = int(time.time())
        forged["expired"] = world.resign(real, iat=now - 1200, nbf=now - 1200, exp=now - 600)
    for name, value in forged.items():
        try:
            await refused_both(callee, devmodel, token(value), 401, "invalid_token")
        except AssertionError as exc:  # pragma: no cover - names the forgery that passed
            raise AssertionError(f"{name}: {exc}") from exc


async def test_a_token_given_twice_is_401(
    callee: ServiceProcess, world: World, devmodel: DevModel
) -> None:
    real = world.mint(CALLER_A)
    headers = CIMultiDict([(wire.AGENT_TOKEN_HEADER, real), (wire.AGENT_TOKEN_HEADER, real)])
    headers["X-KAOS-Delegation-Depth"] = "1"
    before = callee_calls(devmodel)
    body = {"model": "callee", "messages": [{"role": "user", "content": "hello callee"}]}
    async with (
        aiohttp.ClientSession() as http,
        http.post(callee.url + "/v1/chat/completions", json=body, headers=headers) as resp,
    ):
        doc = await resp.json(content_type=None)
    assert resp.status == 401, doc
    assert doc["error"]["code"] == "invalid_token"
    assert "more than once" in doc["error"]["message"]
    assert callee_calls(devmodel) == before


async def test_a_revoked_caller_is_refused_without_a_restart(
    callee: ServiceProcess, world: World, devmodel: DevModel
) -> None:
    headers = token(world.mint(CALLER_A))
    assert (await a2a(callee, headers)).status == 200
    world.write_callers(CALLER_B)  # the operator dropped A from the callee's access
    try:
        await refused_both(callee, devmodel, headers, 403, "caller_not_allowed")
    finally:
        world.write_callers(CALLER_A)
    assert (await chat(callee, headers)).status == 200


# --------------------------------------------------------------------- end to end


async def test_an_agent_with_its_peer_token_delegates(
    callee: ServiceProcess,
    world: World,
    devmodel: DevModel,
    module_agent_factory: AgentFactory,
) -> None:
    peer_token = world.tmp / "caller-a-peer-token"
    peer_token.write_text(world.mint(CALLER_A))
    caller = module_agent_factory(
        "caller-a", AGENT_SUB_AGENTS=f"b:{callee.url}", AGENT_PEER_TOKEN_FILE=peer_token
    )
    devmodel.set_script(DELEGATE_SCRIPT)
    answer = await chat(caller, {"X-Principal": "alice"}, "please ask b")
    assert answer.status == 200, answer.doc
    assert answer.doc["choices"][0]["message"]["content"] == "B said: Echo: remember code 4711"
    # The callee ran the delegated message: the caller's two model calls and the callee's one.
    assert callee_calls(devmodel, "please ask b", "remember code 4711") == 3
