"""Who may read an agent's audit trail under ``AGENT_RBAC``, decided by Kubernetes RBAC:
the real API server, Hydra's tokens, a real ``kaos-agent`` and a real MCP tool server.

The chart's agent RBAC (with its ``<release>-agent-audit-reader`` ClusterRole) is applied
to the test cluster; alice and bob may both talk to the agent. Checked: alice's run is in
the trail under her principal; without ``get`` on ``agents/audit`` nobody reads the trail,
not even the entries of their own runs (403 ``agent_not_granted`` naming the subresource);
bob, bound to the audit reader role, reads every entry, alice's included; a request
without a token is 401.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest

from tests.e2e.user_identity.rbac import apply, granted_namespace, namespace_grant
from tests.e2e.user_identity.test_user_identity import AUDIENCE, chat
from tests.e2e.user_identity.world import RBAC_PREFIX, AgentNamespace
from tests.fixtures.agent import AgentFactory, McpFactory
from tests.fixtures.helm import Helm
from tests.support.cluster import Cluster
from tests.support.devmodel import DevModel
from tests.support.oidc import Provider
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

AGENT = "auditee"
PREFIX = RBAC_PREFIX
CACHE_SECONDS = 1
# What a new binding may take to reach the API server's authorizer, beyond the cache.
GRANT_SLACK = 15.0
TOOLS = '''
def forecast(city: str) -> str:
    """Weather forecast for a city."""
    return f"sunny in {city}"
'''
SCRIPT: list[dict[str, Any]] = [
    {"match": "^weather", "tool_call": {"name": "forecast", "arguments": {"city": "Oslo"}}},
    {"after_tool": "forecast", "reply": "It is {result}"},
]


@pytest.fixture(scope="module")
def world(
    k8s_cluster: Cluster, helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[AgentNamespace, str]]:
    if k8s_cluster.workdir is None:
        pytest.skip("a cluster from KAOS_TEST_KUBECONFIG: its CA file is not here")
    users = (f"{PREFIX}alice", f"{PREFIX}bob")
    tmp = tmp_path_factory.mktemp("audit-rbac")
    with granted_namespace(k8s_cluster, helm, "audit-rbac", AGENT, tmp, *users) as world:
        yield world


@pytest.fixture
def agent(
    world: tuple[AgentNamespace, str],
    oidc_provider: Provider,
    agent_factory: AgentFactory,
    mcp_server_factory: McpFactory,
) -> ServiceProcess:
    space, _ = world
    tools = mcp_server_factory(TOOLS)
    return agent_factory(
        AGENT,
        MCP_SERVERS=f"weather:{tools.url}",
        **space.verified_env(AGENT, oidc_provider, AUDIENCE, cache_seconds=CACHE_SECONDS),
    )


async def audit(agent: ServiceProcess, token: str | None) -> tuple[int, dict[str, Any]]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(agent.url + "/v1/audit", headers=headers) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


def reader_binding(ns: str, release: str, user: str) -> dict[str, Any]:
    role = f"{release}-kaos-agent-audit-reader"
    binding = namespace_grant(ns, role, user)
    binding["metadata"]["name"] = "audit-readers"
    return binding


async def test_reading_the_trail_needs_get_on_agents_audit(
    world: tuple[AgentNamespace, str],
    agent: ServiceProcess,
    oidc_provider: Provider,
    devmodel: DevModel,
) -> None:
    space, release = world
    alice = oidc_provider.token("alice", audience=AUDIENCE).access_token
    bob = oidc_provider.token("bob", audience=AUDIENCE).access_token
    devmodel.set_script(SCRIPT)
    reply = await chat(agent, "weather please", alice, "s-audit")
    assert (reply.status, reply.text) == (200, "It is sunny in Oslo")

    for token, user in ((alice, "alice"), (bob, "bob")):
        status, body = await audit(agent, token)
        assert status == 403, body
        assert body["error"]["code"] == "agent_not_granted"
        assert (
            f'user "{PREFIX}{user}" may not get agents.kaos.tools/audit'
            in (body["error"]["message"])
        )
    assert (await audit(agent, None))[0] == 401

    apply(space.cluster, [reader_binding(space.ns, release, f"{PREFIX}bob")])
    deadline = time.monotonic() + CACHE_SECONDS + GRANT_SLACK
    while (answer := await audit(agent, bob))[0] != 200:
        assert answer[0] == 403, answer
        assert time.monotonic() < deadline, "bob's audit grant never took effect"
        await asyncio.sleep(0.2)  # polling interval of a deadline wait
    (entry,) = answer[1]["items"]
    assert (entry["kind"], entry["name"], entry["outcome"]) == ("tool", "forecast", "ok")
    assert entry["user"] == "alice" and entry["session"] == "s-audit"
    assert "arguments" not in entry
    # Alice, still without the grant, still reads nothing.
    assert (await audit(agent, alice))[0] == 403
