"""The console's pure parts: rows and topology from resources, the SVG, the digest diff,
the HTML (escaping, MemoryDegraded, what a forget erases), kubectl's failures in words,
the bind check, and the request guard (Host, CSRF, Origin, CSP) over real HTTP.

Health, banners and error pages have their own modules: ``test_console_*.py``."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from kaos_cli.kubectl.aio import Cluster, ClusterError
from kaos_cli.tools import CliError
from kaos_cli.ui.command import REMOTE_REFUSAL, check_address
from kaos_cli.ui.diff import diff_html
from kaos_cli.ui.model import age, summarize, topology
from kaos_cli.ui.render import forget as forget_render
from kaos_cli.ui.render import memory as memory_render
from kaos_cli.ui.render import overview as overview_render
from kaos_cli.ui.render.memory import DigestVersion, Scope
from kaos_cli.ui.security import CSP
from kaos_cli.ui.server import create_app
from kaos_cli.ui.state import UiConfig
from kaos_cli.ui.topology import render_svg
from kaos_core.memory.contract import Fact, Provenance, WindowTurn
from kaos_core.tokens import turn_tokens

from tests.support.procs import free_port

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def obj(kind: str, name: str, spec: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-01-02T02:04:05Z"},
        "spec": spec or {},
        "status": status,
    }


CONDITIONS = [
    {"type": "Ready", "status": "True", "reason": "Ready", "message": "ok"},
    {"type": "MemoryDegraded", "status": "True", "reason": "MemoryStoreNotFound",
     "message": "memory-local is gone"},
]  # fmt: skip
COORDINATOR = obj(
    "Agent",
    "coordinator",
    {
        "modelAPI": "llm",
        "mcpServers": ["text-tools"],
        "agentNetwork": {"access": ["researcher"]},
        "config": {"memory": {"memoryStore": "mem"}},
    },
    phase="Ready",
    conditions=CONDITIONS,
    endpoint="http://coordinator.ns.svc:8000",
)


def rows() -> list[Any]:
    return [
        summarize("Agent", COORDINATOR, NOW),
        summarize("Agent", obj("Agent", "researcher", {"modelAPI": "llm"}, phase="Ready"), NOW),
        summarize("ModelAPI", obj("ModelAPI", "llm", phase="Ready"), NOW),
    ]


def test_summarize_reads_phase_conditions_endpoint_and_age() -> None:
    row = summarize("Agent", COORDINATOR, NOW)
    assert (row.phase, row.endpoint, row.age) == ("Ready", "http://coordinator.ns.svc:8000", "1h")
    assert row.degraded is not None and row.degraded.reason == "MemoryStoreNotFound"
    assert summarize("Agent", obj("Agent", "x"), NOW).phase == "Pending"
    stamps = (None, "garbage", "2026-01-02T03:04:00Z", "2025-12-30T03:04:05Z")
    assert [age(s, NOW) for s in stamps] == ["-", "-", "5s", "3d"]


def test_topology_has_every_reference_and_marks_missing_ones() -> None:
    graph = topology(rows(), "ns")
    edges = {(e.source, e.target, e.label) for e in graph.edges}
    assert edges == {
        ("Agent/coordinator", "Agent/researcher", "delegates"),
        ("Agent/coordinator", "MCPServer/text-tools", "tools"),
        ("Agent/coordinator", "ModelAPI/llm", "model"),
        ("Agent/coordinator", "MemoryStore/mem", "memory"),
        ("Agent/researcher", "ModelAPI/llm", "model"),
    }
    nodes = {n.id: n for n in graph.nodes}
    assert nodes["MemoryStore/mem"].phase == "" and nodes["MCPServer/text-tools"].phase == ""
    assert nodes["Agent/coordinator"].degraded and not nodes["Agent/researcher"].degraded
    assert topology(rows(), "elsewhere").nodes == ()


def test_svg_draws_each_node_and_edge_escaped() -> None:
    svg = render_svg(topology(rows(), "ns"))
    assert svg.startswith("<svg") and svg.count('class="node ') == 5
    assert svg.count('class="edge edge-') == 5 and "edge-delegates" in svg
    assert 'data-node="MemoryStore/mem"' in svg and "state-missing" in svg
    assert "state-degraded tone-warn" in svg and "Agent · Degraded: memory" in svg
    assert '<a href="/agents/ns/coordinator">' in svg and 'href="/memory/ns/mem"' not in svg
    hostile = summarize("Agent", obj("Agent", "<b>x</b>", phase="Ready"), NOW)
    drawn = render_svg(topology([hostile], "ns"))
    assert "<b>" not in drawn and "&lt;b&gt;x&lt;/b&gt;" in drawn
    assert "nothing deployed" in render_svg(topology([], "ns"))


def test_diff_marks_inserted_and_removed_words() -> None:
    out = diff_html("User lives in Porto.", "User lives in Lisbon. Likes <trams>.")
    assert out == "User lives in <del>Porto.</del><ins>Lisbon. Likes &lt;trams&gt;.</ins>"
    assert diff_html("same text", "same text") == "same text"


def test_overview_shows_memory_degraded_and_problems() -> None:
    html = overview_render.overview_fragment(rows(), [("forbidden", "may not list agents")])
    assert 'class="problem problem-forbidden tone-warn"' in html
    degraded = re.search(
        r'<span class="chip tone-warn bad degraded"[^>]*data-condition="MemoryDegraded"', html
    )
    assert degraded, html
    assert 'href="/agents/ns/coordinator"' in html and 'data-phase="Ready"' in html
    assert 'data-health="Degraded"' in html
    assert "No KAOS resources" in overview_render.overview_fragment([], [])


def test_pages_carry_the_csrf_token_and_no_inline_script() -> None:
    page = overview_render.overview_page("", csrf="tok&", context="ctx")
    assert '<meta name="kaos-csrf" content="tok&amp;">' in page
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/console.js" defer>']
    assert "style=" not in page and "http" not in page.replace("/static/", "")


def test_window_counts_tokens_as_the_memory_service_does() -> None:
    turns = [WindowTurn(role="user", content="x" * 10, at="2026-01-02T03:04:05+00:00")]
    html = memory_render.window_html(turns, 400, 300)
    assert f'data-tokens="{turn_tokens("x" * 10)}"' in html and turn_tokens("x" * 10) == 7
    assert "400-token budget (fold at 300)" in html and "01-02 03:04:05" in html


def test_forget_confirmation_says_what_is_erased() -> None:
    session = Scope("session", "alice", "s1").erases("mem")
    assert "session s1 of principal alice" in session and "MemoryStore mem" in session
    assert "every long-term fact of principal alice" in Scope("user", "alice", "").erases("m")
    assert "everything in MemoryStore mem" in Scope("store", "", "").erases("mem")
    page = forget_render.forget_confirm_page(
        namespace="ns", store="mem", scope=Scope("session", "al<ice", "s1"), csrf="t", context="c"
    )
    assert "al&lt;ice" in page and 'name="csrf" value="t"' in page and 'method="post"' in page


def test_digest_lists_versions_and_diffs_the_last_two() -> None:
    v1, v2 = DigestVersion(1, "User said: hi."), DigestVersion(2, "User said: hi. Bye.")
    html = memory_render.digest_html(v2, [v1, v2])
    assert 'data-version="2"' in html and "version 1 → 2" in html and "<ins>" in html
    assert "digest-diff" not in memory_render.digest_html(v1, [v1])
    assert "no digest yet" in memory_render.digest_html(None, [])


@pytest.mark.parametrize(
    ("stderr", "problem", "verb", "resource"),
    [
        ('Error from server (Forbidden): agents.kaos.tools is forbidden: User "bob" cannot list '
         'resource "agents" in API group "kaos.tools" at the cluster scope',
         "forbidden", "list", "agents.kaos.tools"),
        ('Error from server (Forbidden): pods "x" is forbidden: User "bob" cannot create '
         'resource "pods/portforward" in API group "" in the namespace "ns"',
         "forbidden", "create", "pods/portforward"),
        ("E1204 memcache.go:265] couldn't get current server API group list: Get "
         '"https://127.0.0.1:1/api": dial tcp 127.0.0.1:1: connect: connection refused',
         "unreachable", "", ""),
        ('error: the server doesn\'t have a resource type "agents"', "not-installed", "", ""),
        ('Error from server (NotFound): agents.kaos.tools "x" not found', "not-found", "", ""),
        ("something else", "failed", "", ""),
    ],
)  # fmt: skip
def test_kubectl_failures_in_words(stderr: str, problem: str, verb: str, resource: str) -> None:
    error = ClusterError.of(stderr, "get agents")
    assert (error.problem, error.verb, error.resource) == (problem, verb, resource)
    if problem == "forbidden":
        assert f"verb {verb} on {resource}" in error.message
    if problem == "unreachable":
        assert "dial tcp 127.0.0.1:1: connect: connection refused" in error.message


def test_only_loopback_binds_without_the_flag() -> None:
    assert check_address("127.0.0.1", False) == "127.0.0.1"
    assert check_address("localhost", False) == "127.0.0.1"
    assert check_address("::1", False) == "::1"
    for address in ("0.0.0.0", "10.1.2.3", "::", "example.com"):
        with pytest.raises(CliError) as refused:
            check_address(address, False)
        assert refused.value.message == REMOTE_REFUSAL.format(address=address)
        assert refused.value.exit_code == 2
    assert check_address("0.0.0.0", True) == "0.0.0.0"


@pytest.fixture
async def client() -> AsyncIterator[TestClient[Any, Any]]:
    # kubectl that always fails: the pages render the failure; the guard is under test.
    port = free_port()
    hosts = frozenset({f"127.0.0.1:{port}"})
    config = UiConfig(context="test", namespace=None, hosts=hosts, csrf="secret-token")
    app = create_app(config, Cluster("/bin/false"), watch=False)
    async with TestClient(TestServer(app, host="127.0.0.1", port=port)) as tc:
        yield tc


async def test_guard_checks_host_csrf_and_origin(client: TestClient[Any, Any]) -> None:
    own = f"http://127.0.0.1:{client.port}"
    page = await client.get("/")
    assert page.status == 200 and page.headers["Content-Security-Policy"] == CSP
    assert "default-src 'self'" in CSP and "Cache-Control" in page.headers
    assert "failed" in await page.text()  # /bin/false: the failure shown in the page
    rebound = await client.get("/", headers={"Host": f"evil.example:{client.port}"})
    assert rebound.status == 421
    form = {"level": "store", "csrf": "secret-token"}
    no_token = await client.post("/memory/ns/mem/forget", data={"level": "store"})
    assert no_token.status == 403 and "CSRF" in await no_token.text()
    wrong = await client.post("/memory/ns/mem/forget", data={**form, "csrf": "nope"})
    assert wrong.status == 403
    foreign = await client.post(
        "/memory/ns/mem/forget", data=form, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status == 403 and "cross-origin" in await foreign.text()
    null = await client.post("/memory/ns/mem/forget", data=form, headers={"Origin": "null"})
    assert null.status == 403
    # The right token and origin pass the guard; the store then cannot be read (502).
    allowed = await client.post("/memory/ns/mem/forget", data=form, headers={"Origin": own})
    assert allowed.status == 502 and "nothing was erased" in await allowed.text()
    chat = await client.post(
        "/agents/ns/a/chat", json={"message": "hi", "session": " "},
        headers={"X-Kaos-Csrf": "secret-token"},
    )  # fmt: skip
    assert chat.status == 400 and "X-Session-Id is empty" in (await chat.json())["error"]


async def test_bad_forget_input_erases_nothing(client: TestClient[Any, Any]) -> None:
    headers = {"X-Kaos-Csrf": "secret-token"}
    for data, says in (
        ({"level": "galaxy"}, "level must be one of session, agent, user, store"),
        ({"level": "agent"}, "pick an agent"),
        ({"level": "session"}, "pick a session"),
        ({"level": "user"}, "pick a principal"),
    ):
        resp = await client.post("/memory/ns/mem/forget", data=data, headers=headers)
        assert resp.status == 400 and says in await resp.text(), data


async def test_static_assets_ship_in_the_package(client: TestClient[Any, Any]) -> None:
    for path, kind in (
        ("console.js", "javascript"),
        ("console.css", "css"),
        ("favicon.svg", "svg"),
    ):
        resp = await client.get(f"/static/{path}")
        assert resp.status == 200 and kind in resp.headers["Content-Type"], path
    script = await (await client.get("/static/console.js")).text()
    assert "http://" not in script and "https://" not in script


def test_facts_page_links_the_next_page_and_escapes() -> None:
    fact = Fact(
        id="f1",
        text="<i>x</i>",
        user_id="alice",
        session_id="s1",
        agent_id="kaos://agent/ns/a",
        created_at="2026-01-02T03:04:05Z",
        score=0.5,
    )
    html = memory_render.facts_html([fact], scored=True, next_page="/memory/ns/m?cursor=a&b")
    assert "&lt;i&gt;x&lt;/i&gt;" in html and "0.500" in html and "by relevance" in html
    assert 'id="next-page" href="/memory/ns/m?cursor=a&amp;b"' in html
    assert "no long-term facts" in memory_render.facts_html([], scored=False, next_page=None)


def test_facts_show_their_source_with_the_provenance_as_its_tooltip() -> None:
    extracted = Provenance(
        source="tool",
        turns=[4, 7],
        observed_at="2026-03-01T10:00:00Z",
        recorded_at="2026-03-01T10:00:05Z",
        model='dev/"<m>"',
    )
    written = Provenance(source="saved", turns=[9], recorded_at="2026-03-01T10:00:05Z")
    facts = [
        Fact(id="f1", text="a", created_at="2026-03-01T10:00:05Z", provenance=extracted),
        Fact(id="f2", text="b", created_at="2026-03-01T10:00:05Z", provenance=written),
        Fact(id="f3", text="c", created_at="2025-01-01T00:00:00Z"),
    ]
    html = memory_render.facts_html(facts, scored=False, next_page=None)
    assert "<th>text</th><th>source</th><th>agent</th>" in html
    cells = re.findall(r"<tr><td>[abc]</td><td>(.*?)</td>", html)
    assert cells == [
        '<span class="source" data-source="tool" title="turns 4, 7; said 2026-03-01T10:00:00Z;'
        ' extracted by dev/&quot;&lt;m&gt;&quot;">tool</span>',
        '<span class="source" data-source="saved" title="turns 9; said not recorded; stored as'
        ' written">saved</span>',
        '<span class="source" title="provenance not recorded">-</span>',
    ]
