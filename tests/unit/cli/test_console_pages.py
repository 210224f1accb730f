"""The console's pages over HTTP, with an in-process cluster at the kubectl boundary: a
404 page that names the namespace and suggests close names, a 404 for an unknown
MemoryStore, error pages without exception text, the empty state's commands, the
inspector's ``agent`` level, and banners that match the badge."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from kaos_cli.commands.samples import catalogue
from kaos_cli.kubectl.aio import Cluster, ClusterError
from kaos_cli.ui.live import BROKER, watch_once
from kaos_cli.ui.render.overview import SAMPLES_IN_ORDER, deploy_commands
from kaos_cli.ui.security import CSP
from kaos_cli.ui.server import create_app
from kaos_cli.ui.state import UiConfig

HTML = {"Accept": "text/html,application/xhtml+xml"}
SECRET = "token=hunter2 at 0xdeadbeef"


def obj(kind: str, name: str, ns: str = "team", spec: dict[str, Any] | None = None,
        **status: Any) -> dict[str, Any]:  # fmt: skip
    return {"kind": kind, "metadata": {"name": name, "namespace": ns}, "spec": spec or {},
            "status": status}  # fmt: skip


READY = [{"type": "Ready", "status": "True", "reason": "Available", "message": ""}]
PENDING = [{"type": "Ready", "status": "False", "reason": "DeploymentProgressing",
            "message": "waiting for the deployment"}]  # fmt: skip
USES_MEMORY = {"config": {"memory": {"memoryStore": "memory-local"}}}


@dataclass
class FakeCluster(Cluster):
    """kubectl's answers from a list of objects, in-process; nothing has a Service."""

    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    namespaces: set[str] = field(default_factory=set)
    broken: Exception | None = None

    async def items(self, resource: str, namespace: str | None) -> list[dict[str, Any]]:
        if self.broken is not None:
            raise self.broken
        found = self.objects.get(resource, [])
        return [o for o in found if namespace is None or o["metadata"]["namespace"] == namespace]

    async def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        for o in await self.items(resource, namespace):
            if o["metadata"]["name"] == name:
                return o
        stderr = f'Error from server (NotFound): {resource} "{name}" not found'
        raise ClusterError.of(stderr, f"get {resource} {name}")

    async def json(self, *args: str) -> Any:
        if args[:2] == ("get", "namespace"):
            if args[2] in self.namespaces:
                return {"metadata": {"name": args[2]}}
            raise ClusterError.of(f'Error from server (NotFound): namespaces "{args[2]}" '
                                  "not found", "get namespace")  # fmt: skip
        return {"items": []}  # events

    async def run(self, *args: str) -> str:
        return "a log line"

    async def start(self, *args: str) -> Any:
        service = args[-2].removeprefix("svc/")
        raise ClusterError.of(f'Error from server (NotFound): services "{service}" not found',
                              f"port-forward svc/{service} in namespace team")  # fmt: skip


def cluster() -> FakeCluster:
    return FakeCluster(
        "kubectl",
        objects={
            "agents.kaos.tools": [
                obj("Agent", "coordinator", spec=USES_MEMORY, phase="Ready", conditions=READY),
                obj("Agent", "researcher", spec=USES_MEMORY, phase="Ready", conditions=READY),
                obj("Agent", "helper", ns="other", phase="Ready", conditions=READY),
            ],
            "memorystores.kaos.tools": [
                obj("MemoryStore", "memory-local", phase="Ready", conditions=READY),
                obj("MemoryStore", "memory-slow", phase="Pending", conditions=PENDING),
            ],
        },
        namespaces={"team", "other"},
    )


async def serve(fake: FakeCluster, namespace: str | None = None) -> TestClient[Any, Any]:
    config = UiConfig(context="kind-kaos", namespace=namespace, hosts=None, csrf="tok")
    client: TestClient[Any, Any] = TestClient(TestServer(create_app(config, fake, watch=False)))
    await client.start_server()
    return client


@pytest.fixture
async def console() -> AsyncIterator[TestClient[Any, Any]]:
    client = await serve(cluster())
    yield client
    await client.close()


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).split())


async def test_an_unknown_agent_is_a_404_naming_the_namespace_and_close_names(
    console: TestClient[Any, Any],
) -> None:
    resp = await console.get("/agents/team/reseacher", headers=HTML)
    page = await resp.text()
    assert resp.status == 404 and resp.content_type == "text/html"
    assert '<h1 id="not-found">No Agent reseacher in namespace team</h1>' in page
    assert 'Did you mean <a href="/agents/team/researcher">researcher</a>?' in page
    assert "The Agents in namespace team: coordinator, researcher." in text(page)
    assert '<a id="back" href="/">' in page
    elsewhere = await (await console.get("/agents/team/helper", headers=HTML)).text()
    assert "An Agent named helper is in namespace other: helper" in text(elsewhere)
    gone = await console.get("/agents/nosuch/x", headers=HTML)
    assert gone.status == 404 and "Namespace nosuch does not exist." in await gone.text()


async def test_an_unknown_memory_store_is_a_404_not_a_degraded_page(
    console: TestClient[Any, Any],
) -> None:
    for path in ("/memory/team/memory-locl", "/memory/team/memory-locl/forget?level=store"):
        resp = await console.get(path, headers=HTML)
        page = await resp.text()
        assert resp.status == 404, path
        assert "No MemoryStore memory-locl in namespace team" in page
        assert (
            'Did you mean <a href="/memory/team/memory-local">memory-local</a> or '
            '<a href="/memory/team/memory-slow">memory-slow</a>?'
        ) in page
        assert "degraded" not in page
    erase = await console.post(
        "/memory/team/memory-locl/forget", data={"level": "store", "csrf": "tok"}, headers=HTML
    )
    assert erase.status == 404


async def test_failures_are_pages_without_exception_text() -> None:
    fake = cluster()
    fake.broken = RuntimeError(SECRET)
    client = await serve(fake)
    try:
        for path in ("/", "/agents/team/coordinator", "/memory/team/memory-local"):
            resp = await client.get(path, headers=HTML)
            page = await resp.text()
            assert resp.status == 500, path
            assert SECRET not in page and "RuntimeError" not in page and "Traceback" not in page
            assert "the terminal running kaos ui has the details" in page
            assert '<a id="back" href="/">' in page
        api = await client.get("/agents/team/coordinator")  # a script's fetch: JSON
        assert api.status == 500 and SECRET not in await api.text()
        assert "the console failed" in (await api.json())["error"]
        fake.broken = ClusterError("unreachable", "the Kubernetes cluster cannot be reached: "
                                   "dial tcp 127.0.0.1:1: connect: connection refused")  # fmt: skip
        down = await client.get("/agents/team/coordinator", headers=HTML)
        assert down.status == 502
        assert '<h1 id="error-title">The cluster cannot be reached</h1>' in await down.text()
    finally:
        await client.close()
    # aiohttp's own 404 and 405 as pages too.
    client = await serve(cluster())
    try:
        nowhere = await client.get("/no/such/page", headers=HTML)
        assert nowhere.status == 404
        assert "the console has no page at /no/such/page" in await nowhere.text()
        assert nowhere.headers["Content-Security-Policy"] == CSP
        wrong = await client.put("/", headers={**HTML, "X-Kaos-Csrf": "tok"})
        assert wrong.status == 405 and "does not answer PUT requests" in await wrong.text()
    finally:
        await client.close()


def test_the_empty_state_commands_name_real_samples_in_order() -> None:
    known = {s["name"] for s in catalogue()}
    assert set(SAMPLES_IN_ORDER) <= known
    assert deploy_commands("team") == [
        "kaos samples deploy devmodel -n team",
        "kaos samples deploy modelapi -n team",
        "kaos samples deploy mcpserver -n team",
        "kaos samples deploy memorystore-local -n team",
        "kaos samples deploy agents -n team --wait",
    ]
    assert deploy_commands(None)[0] == "kaos samples deploy devmodel"


async def test_an_empty_namespace_shows_the_commands() -> None:
    client = await serve(FakeCluster("kubectl"), namespace="empty")
    try:
        page = await (await client.get("/", headers=HTML)).text()
        assert "No KAOS resources in namespace empty yet." in text(page)
        block = re.search(r'<pre class="commands" id="empty-commands">(.*?)</pre>', page, re.S)
        assert block and block.group(1).splitlines() == deploy_commands("empty")
        assert 'data-cluster="reachable"' in page
    finally:
        await client.close()


async def test_an_unreachable_cluster_turns_the_dot_red_from_the_start() -> None:
    fake = FakeCluster("kubectl", broken=ClusterError("unreachable", "the Kubernetes cluster "
                                                      "cannot be reached: dial tcp"))  # fmt: skip
    client = await serve(fake)
    try:
        page = await (await client.get("/", headers=HTML)).text()
        assert '<span id="live" class="live down" data-cluster="unreachable"' in page
        assert '<div id="cluster-state" data-cluster="unreachable" hidden>' in page
        assert "No KAOS resources" not in page
    finally:
        await client.close()


async def test_the_probe_failing_on_a_ready_agent_is_a_warning_beside_its_badge(
    console: TestClient[Any, Any],
) -> None:
    page = await (await console.get("/agents/team/coordinator", headers=HTML)).text()
    assert '<dd id="health"><span class="phase tone-ok" data-tone="ok">Ready</span>' in page
    banners = re.findall(r'<div class="problem (tone-\w+)[^"]*" data-check="(\w+)"', page)
    assert banners == [("tone-warn", "probe")], banners
    assert (
        "Console probe failed: its agent card (/.well-known/agent-card.json on svc/coordinator) "
        "did not answer (port-forward svc/coordinator in namespace team not found), though the "
        "operator reports Agent coordinator Ready."
    ) in text(page)


async def test_the_inspector_reconciles_with_the_store_and_has_the_agent_level(
    console: TestClient[Any, Any],
) -> None:
    page = await (await console.get("/memory/team/memory-local", headers=HTML)).text()
    select = re.search(r'<select name="level" id="level">(.*?)</select>', page)
    assert select is not None
    options = re.findall(r'<option value="(\w+)"', select.group(1))
    assert options == ["session", "agent", "user", "store"]
    assert re.findall(r'<datalist id="agents">(.*?)</datalist>', page) == [
        '<option value="coordinator"></option><option value="researcher"></option>'
    ]
    assert '<span class="phase tone-ok" data-tone="ok">Ready</span>' in page
    assert re.findall(r'data-check="(\w+)"', page) == ["probe"]
    assert "though the operator reports MemoryStore memory-local Ready" in page
    slow = await (await console.get("/memory/team/memory-slow", headers=HTML)).text()
    assert re.findall(r'class="problem (tone-\w+)[^"]*" data-check="(\w+)"', slow) == [
        ("tone-progress", "operator")
    ]
    assert "Operator: MemoryStore memory-slow is Pending, Ready=False DeploymentProgressing" in slow
    bad = await console.get("/memory/team/memory-local?level=agent&agent=no/such/thing",
                            headers=HTML)  # fmt: skip
    assert "is not an Agent&#x27;s name or kaos://agent/&lt;namespace&gt;/&lt;name&gt;" in (
        await bad.text()
    )
    confirm = await console.get(
        "/memory/team/memory-local/forget?level=agent&agent=coordinator&principal=alice",
        headers=HTML,
    )
    assert confirm.status == 200
    assert (
        "This erases the window and digest of every session of agent coordinator of principal "
        "alice, and every long-term fact of agent coordinator of principal alice, in "
        "MemoryStore memory-local."
    ) in text(await confirm.text())


@dataclass
class FlakyCluster(FakeCluster):
    """A cluster whose watches fail while ``down`` and end quietly otherwise."""

    down: bool = True

    async def watch(self, resources: str, namespace: str | None) -> AsyncIterator[str]:
        if self.down:
            raise ClusterError("unreachable", "the Kubernetes cluster cannot be reached: dial")
        for line in ():
            yield line


async def test_a_watch_that_recovers_clears_the_unreachable_note() -> None:
    fake = FlakyCluster("kubectl")
    config = UiConfig(context="c", namespace="team", hosts=None)
    app = create_app(config, fake, watch=False)
    with app[BROKER].subscribe() as told:
        await watch_once(app, "Agent", "agents.kaos.tools")
        assert app[BROKER].errors == {
            "Agent": ("unreachable", "the Kubernetes cluster cannot be reached: dial")
        }
        assert told.get_nowait() == "Agent"
        fake.down = False
        await watch_once(app, "Agent", "agents.kaos.tools")
        assert app[BROKER].errors == {} and told.get_nowait() == "Agent"
