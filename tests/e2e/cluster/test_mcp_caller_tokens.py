"""MCP servers verify their callers, against the test cluster's real issuer.

A real ``kaos-mcp`` runs in ``jwks`` mode (keys from the API server's ``/openid/v1/jwks``,
fetched with its own token) and in ``tokenreview`` mode (its ServiceAccount bound to
``system:auth-delegator``), with a callers file listing one agent's ServiceAccount and the
operator's ServiceAccount as its lister. Callers present TokenRequest tokens (``kubectl
create token --audience kaos.dev/mcp``). A refused request runs nothing: the tool's call
counter (``/metrics``) and its side effect (a file it appends to) stay as they were. A
real ``kaos-agent`` with ``AGENT_MCP_TOKEN_FILE`` calls the tool through the scripted model,
and the operator's MCPServer reconciler fills ``status.availableTools`` with its own token.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from kaos_core import wire
from kaos_core.auth import names
from kaos_core.crds import reasons
from kaos_operator.reconcilers import build_reconcilers
from kaos_operator.settings import ReconcileSettings
from kaos_operator.tools import McpError, list_tool_names

from tests.fixtures.agent import AgentFactory
from tests.support.cluster import SERVICE_ACCOUNT_ISSUER, Cluster
from tests.support.devmodel import DevModel
from tests.support.operator_context import FakeContext, raw
from tests.support.operator_objects import IMAGES, Posture
from tests.support.procs import ServiceProcess, console_script, free_port, start_service

pytestmark = pytest.mark.cluster

MODES = ("jwks", "tokenreview")
AGENT_A, AGENT_B, OPERATOR, MCP_SA = "agent-a", "agent-b", "kaos-operator", "kaos-mcp"


@dataclass
class World:
    cluster: Cluster
    ns: str
    tmp: Path

    def mint(self, sa: str, *, audience: str = names.MCP_AUDIENCE) -> str:
        args = ["create", "token", sa, "-n", self.ns, "--duration", "10m"]
        if audience:
            args += ["--audience", audience]
        return self.cluster.kubectl(*args).stdout.strip()

    def write_callers(self, *sas: str) -> None:
        """Replace the callers file atomically, as kubelet swaps a ConfigMap."""
        doc = {
            "callers": [
                {
                    "identity": f"kaos://agent/{self.ns}/{sa}",
                    "namespace": self.ns,
                    "serviceAccount": sa,
                }
                for sa in sas
            ]
        }
        staged = self.tmp / "callers.json.new"
        staged.write_text(json.dumps(doc))
        os.replace(staged, self.callers)

    @property
    def callers(self) -> Path:
        return self.tmp / "callers.json"

    @property
    def side_effects(self) -> Path:
        return self.tmp / "calls.log"

    def effects(self) -> list[str]:
        path = self.side_effects
        return path.read_text().splitlines() if path.exists() else []


def _ca_file(cluster: Cluster, tmp: Path) -> Path:
    if cluster.workdir is not None:
        return cluster.workdir / "pki" / "ca.crt"
    raw_ca = cluster.kubectl(
        "config", "view", "--raw", "--minify", "-o",
        "jsonpath={.clusters[0].cluster.certificate-authority-data}",
    ).stdout  # fmt: skip
    path = tmp / "ca.crt"
    path.write_bytes(base64.b64decode(raw_ca))
    return path


@pytest.fixture(scope="module")
def world(k8s_cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    ns = f"mcp-auth-{uuid.uuid4().hex[:6]}"
    k8s_cluster.kubectl("create", "namespace", ns)
    try:
        for sa in (AGENT_A, AGENT_B, OPERATOR, MCP_SA):
            k8s_cluster.kubectl("create", "serviceaccount", sa, "-n", ns)
        k8s_cluster.kubectl(
            "create", "clusterrolebinding", f"{ns}-auth-delegator",
            "--clusterrole=system:auth-delegator", f"--serviceaccount={ns}:{MCP_SA}",
        )  # fmt: skip
        world = World(k8s_cluster, ns, tmp_path_factory.mktemp("mcp-auth"))
        world.write_callers(AGENT_A)
        yield world
    finally:
        k8s_cluster.kubectl("delete", "clusterrolebinding", f"{ns}-auth-delegator", check=False)
        k8s_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def tool_source(effects: Path) -> str:
    return f'''
def stamp(text: str) -> str:
    """Append the text to the side-effect file and echo it."""
    with open({str(effects)!r}, "a") as out:
        out.write(text + "\\n")
    return "stamped " + text
'''


@pytest.fixture(scope="module", params=MODES)
def server(request: pytest.FixtureRequest, world: World) -> Iterator[ServiceProcess]:
    mode = str(request.param)
    own = world.tmp / f"own-token-{mode}"
    own.write_text(world.mint(MCP_SA, audience=""))  # the API server's audience
    port = free_port()
    env = {
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "MCP_TOOLS_STRING": tool_source(world.side_effects),
        names.MCP_AUTH_MODE: mode,
        names.MCP_AUTH_ISSUER: SERVICE_ACCOUNT_ISSUER,
        names.MCP_AUTH_API_SERVER: world.cluster.server,
        names.MCP_AUTH_CA_FILE: str(_ca_file(world.cluster, world.tmp)),
        names.MCP_AUTH_TOKEN_FILE: str(own),
        names.MCP_CALLERS_FILE: str(world.callers),
        names.MCP_AUTH_LISTER: f"{world.ns}/{OPERATOR}",
    }
    svc = start_service(
        f"mcp-auth-{mode}",
        [console_script("kaos-mcp")],
        port=port,
        env=env,
        log_dir=world.tmp / "logs",
        ready_path="/readyz",
    )
    try:
        yield svc
    finally:
        svc.stop(timeout=15)


@dataclass
class Reply:
    status: int
    doc: dict[str, Any]
    challenge: str


async def rpc(
    server: ServiceProcess,
    method: str,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
) -> Reply:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}
    sent = {"Accept": "application/json, text/event-stream", **(headers or {})}
    async with (
        aiohttp.ClientSession() as http,
        http.post(server.url + "/mcp", json=body, headers=sent) as resp,
    ):
        text = await resp.text()
        if resp.content_type == "text/event-stream":
            text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
        return Reply(resp.status, json.loads(text), resp.headers.get("WWW-Authenticate", ""))


async def call_stamp(
    server: ServiceProcess, text: str, headers: dict[str, str] | None = None
) -> Reply:
    params = {"name": "stamp", "arguments": {"text": text}}
    return await rpc(server, "tools/call", params, headers)


async def tool_calls(server: ServiceProcess) -> float:
    async with aiohttp.ClientSession() as http, http.get(server.url + "/metrics") as resp:
        text = await resp.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("kaos_mcp_tool_calls_total{")
    )


def token(value: str) -> dict[str, str]:
    return {wire.AGENT_TOKEN_HEADER: value}


async def refused(
    server: ServiceProcess, world: World, headers: dict[str, str], status: int, code: str
) -> Reply:
    """A tools/call refused with ``status`` and ``code`` that ran nothing."""
    calls, effects = await tool_calls(server), world.effects()
    reply = await call_stamp(server, f"refused-{code}", headers)
    assert reply.status == status, reply.doc
    assert reply.doc["jsonrpc"] == "2.0" and reply.doc["id"] is None
    assert "result" not in reply.doc
    assert reply.doc["error"]["data"] == {"code": code}, reply.doc
    if status == 401:
        assert 'realm="kaos.dev/mcp"' in reply.challenge
        assert f'error="{code}"' in reply.challenge
    else:
        assert reply.challenge == ""
    assert await tool_calls(server) == calls, "a refused call ran the tool"
    assert world.effects() == effects
    return reply


# --------------------------------------------------------------------- granted


async def test_an_agent_that_references_the_server_calls_its_tool(
    server: ServiceProcess, world: World
) -> None:
    headers = token(world.mint(AGENT_A))
    before = await tool_calls(server)
    listed = await rpc(server, "tools/list", {}, headers)
    assert listed.status == 200, listed.doc
    assert [t["name"] for t in listed.doc["result"]["tools"]] == ["stamp"]
    reply = await call_stamp(server, "granted", headers)
    assert reply.status == 200, reply.doc
    assert reply.doc["result"]["content"][0]["text"] == "stamped granted"
    assert await tool_calls(server) == before + 1
    assert world.effects()[-1] == "granted"


async def test_the_probes_stay_open(server: ServiceProcess) -> None:
    async with aiohttp.ClientSession() as http:
        for path in ("/healthz", "/readyz", "/metrics"):
            async with http.get(server.url + path) as resp:
                assert resp.status == 200, path


# --------------------------------------------------------------------- refused


async def test_a_call_without_a_token_is_401(server: ServiceProcess, world: World) -> None:
    reply = await refused(server, world, {}, 401, "missing_token")
    assert "X-Agent-Token is required" in reply.doc["error"]["message"]
    # Listing is refused too: an unverified caller learns nothing of the tools.
    assert (await rpc(server, "tools/list", {})).status == 401


@pytest.mark.parametrize("audience", [names.AGENT_AUDIENCE, names.MEMORY_AUDIENCE, ""])
async def test_a_token_of_another_audience_is_401(
    server: ServiceProcess, world: World, audience: str
) -> None:
    await refused(
        server, world, token(world.mint(AGENT_A, audience=audience)), 401, "invalid_token"
    )


async def test_garbage_and_repeated_tokens_are_401(server: ServiceProcess, world: World) -> None:
    await refused(server, world, token("not.a.jwt"), 401, "invalid_token")
    real = world.mint(AGENT_A)
    calls = await tool_calls(server)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "stamp"}}
    async with aiohttp.ClientSession() as http:
        headers = [(wire.AGENT_TOKEN_HEADER, real), (wire.AGENT_TOKEN_HEADER, real)]
        async with http.post(server.url + "/mcp", json=body, headers=headers) as resp:
            doc = await resp.json(content_type=None)
    assert resp.status == 401 and "more than once" in doc["error"]["message"], doc
    assert await tool_calls(server) == calls


async def test_an_agent_that_does_not_reference_the_server_is_403(
    server: ServiceProcess, world: World
) -> None:
    reply = await refused(server, world, token(world.mint(AGENT_B)), 403, "caller_not_allowed")
    assert (
        f"{world.ns}/{AGENT_B} is not an agent that lists this MCP server"
        in (reply.doc["error"]["message"])
    )


async def test_a_differing_identity_header_is_403(server: ServiceProcess, world: World) -> None:
    headers = {
        **token(world.mint(AGENT_A)),
        wire.AGENT_IDENTITY_HEADER: f"kaos://agent/{world.ns}/{AGENT_B}",
    }
    await refused(server, world, headers, 403, "identity_mismatch")


async def test_a_removed_reference_is_refused_without_a_restart(
    server: ServiceProcess, world: World
) -> None:
    headers = token(world.mint(AGENT_A))
    assert (await call_stamp(server, "before-revoke", headers)).status == 200
    world.write_callers(AGENT_B)  # the operator dropped a from the server's callers
    try:
        await refused(server, world, headers, 403, "caller_not_allowed")
    finally:
        world.write_callers(AGENT_A)
    assert (await call_stamp(server, "after-regrant", headers)).status == 200


# --------------------------------------------------------------------- the operator


async def test_the_operator_lists_the_tools_and_calls_none(
    server: ServiceProcess, world: World
) -> None:
    own = world.mint(OPERATOR)
    assert await list_tool_names(server.url + "/mcp", own) == ["stamp"]
    reply = await refused(server, world, token(own), 403, "listing_only")
    assert reply.doc["error"]["message"] == (
        "this caller may list the server's tools, not tools/call"
    )
    # Without its token the listing is what any stranger gets.
    with pytest.raises(McpError, match="initialize: HTTP 401"):
        await list_tool_names(server.url + "/mcp")


async def test_available_tools_under_the_secured_posture(
    server: ServiceProcess, world: World
) -> None:
    """The MCPServer reconciler, secured, lists with the operator's token file."""
    token_file = world.tmp / "operator-mcp-token"
    token_file.write_text(world.mint(OPERATOR))

    async def loopback(url: str, presented: str | None) -> list[str]:
        # The Service's name resolves only in the cluster: the same request, here.
        return await list_tool_names(server.url + "/mcp", presented)

    async def status_with(posture: Posture) -> dict[str, Any]:
        ctx = FakeContext(settings=ReconcileSettings(images=IMAGES, posture=posture))
        ctx.add(raw("MCPServer", "tools", {"params": "def f() -> int:\n    return 1\n"}))
        rec = build_reconcilers(ctx, tool_lister=loopback)["MCPServer"]
        await rec.reconcile("ns", "tools")
        ctx.deployment_available("ns", "tools")
        await rec.reconcile("ns", "tools")
        await ctx.woken("MCPServer", "ns", "tools")  # the listing ran beside the reconcile
        await rec.reconcile("ns", "tools")
        return ctx.status_of("MCPServer", "ns", "tools")

    account = f"{world.ns}/{OPERATOR}"
    secured = Posture(
        security_enabled=True, operator_service_account=account, operator_mcp_token_file=token_file
    )
    status = await status_with(secured)
    assert status["availableTools"] == ["stamp"]
    listed = next(c for c in status["conditions"] if c["type"] == reasons.TOOLS_LISTED)
    assert (listed["status"], listed["reason"]) == ("True", reasons.TOOLS_READ)

    # Without its token (what the operator had before): refused, reported, retried.
    status = await status_with(Posture(security_enabled=True, operator_service_account=account))
    assert "availableTools" not in status
    listed = next(c for c in status["conditions"] if c["type"] == reasons.TOOLS_LISTED)
    assert (listed["status"], listed["reason"]) == ("False", reasons.TOOL_LIST_FAILED)


# --------------------------------------------------------------------- end to end


async def test_an_agent_presents_its_rotated_token_file(
    server: ServiceProcess, world: World, devmodel: DevModel, module_agent_factory: AgentFactory
) -> None:
    token_file = world.tmp / f"agent-mcp-token-{uuid.uuid4().hex[:6]}"
    token_file.write_text(world.mint(AGENT_A))
    agent = module_agent_factory(
        f"mcp-caller-{uuid.uuid4().hex[:6]}",
        MCP_SERVERS=f"stamps:{server.url}",
        AGENT_MCP_TOKEN_FILE=token_file,
    )
    devmodel.set_script(
        [
            {"match": "stamp it", "tool_call": {"name": "stamp", "arguments": {"text": "e2e"}}},
            {"after_tool": "stamp", "reply": "Tool said: {result}"},
        ]
    )

    async def ask() -> str:
        async with openai.AsyncOpenAI(base_url=agent.url + "/v1", api_key="x") as oa:
            answer = await oa.chat.completions.create(
                model="a", messages=[{"role": "user", "content": "please stamp it"}]
            )
        return answer.choices[0].message.content or ""

    assert await ask() == "Tool said: stamped e2e"
    assert world.effects()[-1] == "e2e"
    # kubelet rotates the file; here to a token of an agent the server does not list: the
    # next session presents the new token (re-read, not cached), and is refused.
    staged = token_file.with_suffix(".new")
    staged.write_text(world.mint(AGENT_B))
    os.replace(staged, token_file)
    calls = await tool_calls(server)
    answer = await ask()
    assert "stamped" not in answer
    assert await tool_calls(server) == calls
