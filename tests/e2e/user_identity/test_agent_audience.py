"""Each agent's own user audience, end to end: Hydra's real tokens, the test cluster's real
service-account tokens, real ``kaos-agent`` and ``kaos-memory`` processes over real HTTP.

Under a per-agent audience (``posture.userAudience: kaos.dev/agent/{namespace}/{name}``,
as the operator projects it) a gateway asks the provider for a token meant for the agent
the user talks to. Checked: alice's token for the coordinator is accepted there and
refused 401 ``invalid_token`` by the researcher, over chat (JSON error, ``Bearer``
challenge) and over A2A on ``/`` (the JSON-RPC error), with no model call and nothing
written; the coordinator's delegation for alice to the researcher still works, the
researcher and the memory service accepting the token the coordinator forwards; a token
meant for no agent (the old shared audience) is refused everywhere.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from kaos_core import wire
from kaos_core.auth import names

from tests.e2e.user_identity.test_user_identity import DELEGATE, a2a, chat, in_session
from tests.e2e.user_identity.world import AgentNamespace
from tests.fixtures.agent import AgentFactory
from tests.fixtures.memory import MemoryServer, start_memory
from tests.support.cluster import SERVICE_ACCOUNT_ISSUER, Cluster
from tests.support.devmodel import DevModel
from tests.support.localstack import model_request
from tests.support.oidc import Provider
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

PER_AGENT = "kaos.dev/agent/{namespace}/{name}"
COORDINATOR, RESEARCHER, MEMORY_SA = "coordinator", "researcher", "memory"


World = AgentNamespace


@dataclass
class Stack:
    world: World
    provider: Provider
    memory: MemoryServer
    coordinator: ServiceProcess
    researcher: ServiceProcess

    def audience(self, agent: str) -> str:
        return f"kaos.dev/agent/{self.world.ns}/{agent}"

    def token(self, user: str, agent: str) -> str:
        """``user``'s access token for ``agent``, as a gateway asks the provider for it."""
        return self.provider.token(user, audience=self.audience(agent)).access_token

    def turns(self) -> list[dict[str, Any]]:
        return self.memory.db.turns()


@pytest.fixture(scope="module")
def world(k8s_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    if k8s_cluster.workdir is None:
        pytest.skip("a cluster from KAOS_TEST_KUBECONFIG: its CA file is not here")
    ns = f"user-aud-{uuid.uuid4().hex[:6]}"
    k8s_cluster.kubectl("create", "namespace", ns)
    try:
        for sa in (COORDINATOR, RESEARCHER, MEMORY_SA):
            k8s_cluster.kubectl("create", "serviceaccount", sa, "-n", ns)
        yield World(k8s_cluster, ns, tmp_path_factory.mktemp("user-aud"))
    finally:
        k8s_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


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
            "user_issuer": oidc_provider.issuer,
            "user_audience": PER_AGENT,
            "user_ca_file": oidc_provider.ca_file,
        },
    )

    def agent(sa: str, callers: tuple[str, ...], **extra: object) -> ServiceProcess:
        return module_agent_factory(
            sa,
            AGENT_IDENTITY=world.identity(sa),
            MEMORY_TYPE="remote",
            MEMORY_ENDPOINT=memory.proc.url,
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
            AGENT_USER_ISSUER=oidc_provider.issuer,
            AGENT_USER_AUDIENCE=PER_AGENT,
            AGENT_USER_CA_FILE=oidc_provider.ca_file,
            **extra,
        )

    try:
        researcher = agent(RESEARCHER, (COORDINATOR,))
        coordinator = agent(COORDINATOR, (), AGENT_SUB_AGENTS=f"b:{researcher.url}")
        yield Stack(world, oidc_provider, memory, coordinator, researcher)
    finally:
        memory.proc.kill()


def _session() -> str:
    return f"s-{uuid.uuid4().hex[:8]}"


async def test_a_token_for_the_coordinator_is_refused_by_the_researcher(
    stack: Stack, devmodel: DevModel
) -> None:
    alice = stack.token("alice", COORDINATOR)
    before = len(stack.turns())
    prompt = "hello with the coordinator's token"
    refused = await chat(stack.researcher, prompt, alice, _session())
    assert (refused.status, refused.code) == (401, "invalid_token"), refused.doc
    assert refused.doc["error"]["message"] == (
        f"user token refused: token is not meant for audience {stack.audience(RESEARCHER)}"
    )
    assert refused.www.startswith('Bearer realm="kaos.dev/agent", error="invalid_token"')
    assert alice not in json.dumps(refused.doc) and alice not in refused.www
    # Over A2A on ``/``: the JSON-RPC error, the same code.
    status, doc, www = await a2a(stack.researcher, alice)
    assert status == 401 and doc["error"]["data"]["code"] == "invalid_token", doc
    assert www.startswith('Bearer realm="kaos.dev/agent", error="invalid_token"')
    assert len(stack.turns()) == before, "a refused request wrote something"
    requests = await devmodel.arequests()
    assert (
        model_request(requests, prompt) is None
        and model_request(requests, "hello over A2A") is None
    )

    # The same user, with a token for the researcher, is served there (chat and A2A)...
    own = stack.token("alice", RESEARCHER)
    served = await chat(stack.researcher, "hello researcher", own, _session())
    assert served.status == 200, served.doc
    status, doc, _ = await a2a(stack.researcher, own)
    assert status == 200 and doc["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # ...and the coordinator's token at the coordinator.
    assert (await chat(stack.coordinator, "hello coordinator", alice, _session())).status == 200


async def test_the_coordinators_delegation_for_alice_still_reaches_the_researcher(
    stack: Stack, devmodel: DevModel
) -> None:
    alice = stack.token("alice", COORDINATOR)
    devmodel.set_script(DELEGATE)
    session = _session()
    delegated = await chat(stack.coordinator, "please ask b", alice, session)
    assert delegated.status == 200, delegated.doc
    assert delegated.text == "B said: Echo: remember code 4711"
    # Both agents wrote alice's turns: the researcher and the memory service accepted the
    # token the coordinator forwarded, meant for the coordinator.
    rows = [t for t in stack.turns() if in_session(t, session)]
    assert {t["agent"] for t in rows} == {
        stack.world.identity(COORDINATOR),
        stack.world.identity(RESEARCHER),
    }
    assert {t["principal"] for t in rows} == {"alice"}, rows
    assert any(t["content"] == "remember code 4711" for t in rows)


async def _write(stack: Stack, agent: str, user_token: str) -> tuple[int, str]:
    token = stack.world.mint(agent, names.MEMORY_AUDIENCE)
    body = {"turns": [{"role": "user", "content": "direct"}], "infer": False}
    sent = {
        wire.AGENT_TOKEN_HEADER: token,
        wire.USER_TOKEN_HEADER: user_token,
        "X-Session-Id": _session(),
    }
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{stack.memory.proc.url}/v1/write", json=body, headers=sent) as resp,
    ):
        doc = await resp.json(content_type=None)
        return resp.status, str(doc.get("error", {}).get("code", "")) if resp.status >= 400 else ""


async def test_the_memory_service_accepts_a_token_meant_for_an_agent_and_no_other(
    stack: Stack,
) -> None:
    # The researcher forwards the token alice got for the coordinator: some agent's.
    assert await _write(stack, RESEARCHER, stack.token("alice", COORDINATOR)) == (200, "")
    assert stack.turns()[-1]["principal"] == "alice"
    before = len(stack.turns())
    for audience in ("kaos", "kaos.dev/memory"):
        meant_for_no_agent = stack.provider.token("alice", audience=audience).access_token
        assert await _write(stack, RESEARCHER, meant_for_no_agent) == (401, "invalid_token")
        reply = await chat(stack.coordinator, "shared audience", meant_for_no_agent, _session())
        assert (reply.status, reply.code) == (401, "invalid_token"), reply.doc
    assert len(stack.turns()) == before
