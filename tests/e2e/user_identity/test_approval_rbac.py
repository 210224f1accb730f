"""Who may decide a paused run under ``AGENT_RBAC``, decided by Kubernetes RBAC: the real
API server, Hydra's tokens, a real ``kaos-agent`` with an approval gate and a real MCP tool
server that writes every call it receives to a file.

The chart's agent RBAC (with its ``<release>-agent-approver`` ClusterRole) is applied to the
test cluster; alice and bob may both talk to the agent. Checked: alice's run pauses on the
gated call and nothing runs; bob (not the run's user, not granted) is refused with 403 and
nothing changes, and his listing of paused runs shows none; bob, once bound to the
approver role, approves it and the call runs once, and lists alice's next paused run;
alice decides that one herself without any grant.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.e2e.user_identity.rbac import apply, granted_namespace, namespace_grant
from tests.e2e.user_identity.test_user_identity import AUDIENCE
from tests.e2e.user_identity.world import RBAC_PREFIX, AgentNamespace
from tests.fixtures.agent import AgentFactory, McpFactory
from tests.fixtures.helm import Helm
from tests.integration.agent.test_approvals import SCRIPT, TOOLS, Calls
from tests.support.cluster import Cluster
from tests.support.devmodel import DevModel
from tests.support.oidc import Provider
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

AGENT = "payer"
PREFIX = RBAC_PREFIX
CACHE_SECONDS = 1
# What a new binding may take to reach the API server's authorizer, beyond the cache.
GRANT_SLACK = 15.0
GATES = {"rules": [{"mcpServer": "payments", "tools": ["charge"]}], "timeoutSeconds": 600}
PAUSED, COMPLETED = "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"


@pytest.fixture(scope="module")
def world(
    k8s_cluster: Cluster, helm: Helm, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[AgentNamespace, str]]:
    if k8s_cluster.workdir is None:
        pytest.skip("a cluster from KAOS_TEST_KUBECONFIG: its CA file is not here")
    users = (f"{PREFIX}alice", f"{PREFIX}bob")
    tmp = tmp_path_factory.mktemp("approval-rbac")
    with granted_namespace(k8s_cluster, helm, "approval-rbac", AGENT, tmp, *users) as world:
        yield world


@pytest.fixture
def calls(tmp_path: Path) -> Calls:
    return Calls(tmp_path / "calls.log")


@pytest.fixture
def agent(
    world: tuple[AgentNamespace, str],
    oidc_provider: Provider,
    agent_factory: AgentFactory,
    mcp_server_factory: McpFactory,
    calls: Calls,
) -> ServiceProcess:
    space, _ = world
    tools = mcp_server_factory(TOOLS.format(calls=str(calls.path)), name="payments")
    return agent_factory(
        AGENT,
        MCP_SERVERS=f"payments:{tools.url}",
        REASONING_LOOP_MAX_STEPS=5,
        AGENT_APPROVALS=json.dumps(GATES),
        **space.verified_env(AGENT, oidc_provider, AUDIENCE, cache_seconds=CACHE_SECONDS),
    )


async def rpc(
    agent: ServiceProcess, token: str, method: str, params: dict[str, Any]
) -> tuple[int, dict[str, Any]]:
    """One JSON-RPC call to the agent as the token's user."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{agent.url}/", json=body, headers=headers) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


async def send(
    agent: ServiceProcess, token: str, *, text: str | None = None, **decision: object
) -> tuple[int, dict[str, Any]]:
    """A new task (``text``) or a decision on a paused one (``taskId`` and the decision)."""
    task_id = decision.pop("taskId", None)
    parts: list[dict[str, Any]] = [{"text": text}] if text is not None else [{"data": decision}]
    message: dict[str, Any] = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": parts}
    if task_id is not None:
        message["taskId"] = task_id
    return await rpc(agent, token, "SendMessage", {"message": message})


async def paused_ids(agent: ServiceProcess, token: str) -> list[str]:
    """The paused tasks ``ListTasks`` shows the token's user."""
    status, doc = await rpc(agent, token, "ListTasks", {"status": PAUSED})
    assert status == 200 and "result" in doc, doc
    return [t["id"] for t in doc["result"].get("tasks", [])]


async def paused_run(agent: ServiceProcess, token: str) -> dict[str, Any]:
    status, doc = await send(agent, token, text="pay the invoice")
    assert status == 200, doc
    task: dict[str, Any] = doc["result"]["task"]
    assert task["status"]["state"] == PAUSED
    return task


def approver_binding(ns: str, release: str, user: str) -> dict[str, Any]:
    binding = namespace_grant(ns, f"{release}-kaos-agent-approver", user)
    binding["metadata"]["name"] = "approvers"
    return binding


async def test_another_user_decides_only_with_rbacs_approve(
    world: tuple[AgentNamespace, str],
    agent: ServiceProcess,
    oidc_provider: Provider,
    devmodel: DevModel,
    calls: Calls,
) -> None:
    space, release = world
    alice, bob = (
        oidc_provider.token(user, audience=AUDIENCE).access_token for user in ("alice", "bob")
    )
    devmodel.set_script(SCRIPT)
    task = await paused_run(agent, alice)
    assert calls() == ["quote 5"]

    status, refused = await send(agent, bob, taskId=task["id"], decision="approve")
    assert status == 403, refused
    assert refused["error"]["data"]["code"] == "approval_not_granted"
    assert calls() == ["quote 5"]
    # Not an approver: bob's listing of paused runs holds only his own (none).
    assert await paused_ids(agent, bob) == []
    assert await paused_ids(agent, alice) == [task["id"]]

    apply(space.cluster, [approver_binding(space.ns, release, f"{PREFIX}bob")])
    deadline = time.monotonic() + CACHE_SECONDS + GRANT_SLACK
    while (answer := await send(agent, bob, taskId=task["id"], decision="approve"))[0] != 200:
        assert answer[0] == 403, answer
        assert time.monotonic() < deadline, "bob's approver grant never took effect"
        await asyncio.sleep(0.2)  # polling interval of a deadline wait
    done = answer[1]["result"]["task"]
    assert done["status"]["state"] == COMPLETED, done
    assert done["artifacts"][0]["parts"][0]["text"] == "done: charged 5"
    assert done["metadata"]["kaos.dev/approval"]["decidedBy"] == "bob"
    assert calls() == ["quote 5", "charge 5"]
    # An approver lists every user's paused runs: alice's next one shows up in bob's list.
    waiting = await paused_run(agent, alice)
    assert await paused_ids(agent, bob) == [waiting["id"]]

    # The run's own user needs no grant to decide.
    status, denied = await send(agent, alice, taskId=waiting["id"], decision="deny", reason="no")
    assert status == 200 and denied["result"]["task"]["status"]["state"] == COMPLETED, denied
    assert calls() == ["quote 5", "charge 5", "quote 5"]
