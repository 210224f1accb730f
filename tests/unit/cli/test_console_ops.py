"""An agent's operations on its console page when the agent cannot give them: an agent
from before the feature (404), one that refuses the console (403), one that does not
answer; each is a note in its own section and the page is drawn. A decision the agent
refuses, one without the CSRF token and one that is neither approve nor deny change
nothing and say so. What a paused task carries is drawn escaped, its Secret by name.

The agents here are small aiohttp servers standing in for agents of each kind, reached
as the console reaches any agent: through a port-forward (a stand-in kubectl that
announces the server's port). The real agent's answers are ``tests/e2e/console``'s.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from kaos_cli.clients.agent_ops import paused_task, pending_calls
from kaos_cli.kubectl.aio import Cluster, ClusterError
from kaos_cli.ui.model import Note
from kaos_cli.ui.render.agent_ops import Ops, Read, ops_html
from kaos_cli.ui.server import create_app
from kaos_cli.ui.state import UiConfig

HTML = {"Accept": "text/html"}
CSRF = "tok"
READY = [{"type": "Ready", "status": "True", "reason": "Available", "message": ""}]
SPEC: dict[str, Any] = {
    "approvals": {"rules": [{"mcpServer": "pay", "tools": ["charge"]}, {"peer": "billing"}]},
    "schedules": [{"name": "nightly", "cron": "0 3 * * *", "message": "<tidy> up"}],
    "triggers": [{"name": "deploys", "secret": {"name": "hook", "key": "token"},
                  "message": "built {{ repo }}"}],
}  # fmt: skip
PAUSED_TASK = {
    "id": "t-1",
    "contextId": "s-1",
    "status": {"state": "TASK_STATE_INPUT_REQUIRED"},
    "metadata": {
        "kaos": {"principal": "alice"},
        "kaos.dev/approval": {
            "state": "pending",
            "calls": [{"tool": "charge", "arguments": {"to": "<script>x</script>"},
                       "toolCallId": "c-1"}],
            "deadline": "2026-12-06T19:00:00Z",
        },
    },
}  # fmt: skip


def agent_app(kind: str) -> web.Application:
    """An agent of ``kind``: "older" serves its card only; "refusing" refuses the console
    (403) everything it asks; "paused" has one paused task and refuses its decision."""

    async def card(_: web.Request) -> web.Response:
        return web.json_response({"name": "researcher", "skills": []})

    async def refuse(_: web.Request) -> web.Response:
        error = {"code": "forbidden", "message": "no"}
        return web.json_response({"error": error}, status=403)

    async def rpc(request: web.Request) -> web.Response:
        body = await request.json()
        if kind == "paused" and body["method"] == "ListTasks":
            result = {
                "tasks": [
                    PAUSED_TASK,
                    {**PAUSED_TASK, "id": "t-2", "status": {"state": "TASK_STATE_COMPLETED"}},
                ]
            }
            return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": result})
        error = {"code": -32600, "message": "only the run's own user may decide"}
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "error": error}, status=403)

    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", card)
    if kind == "refusing":
        app.router.add_get("/v1/usage", refuse)
        app.router.add_get("/v1/audit", refuse)
    if kind in ("refusing", "paused"):
        app.router.add_post("/", rpc)
    return app


@dataclass
class ForwardingCluster(Cluster):
    """kubectl's answers in-process: one Ready Agent, and its port-forward a stand-in
    kubectl process that announces ``port``."""

    port: int = 0
    spec: dict[str, Any] = field(default_factory=dict)

    async def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        if name != "researcher":
            raise ClusterError.of(f'Error from server (NotFound): {resource} "{name}" not '
                                  "found", f"get {resource} {name}")  # fmt: skip
        return {"kind": "Agent", "metadata": {"name": name, "namespace": namespace},
                "spec": self.spec, "status": {"phase": "Ready", "conditions": READY}}  # fmt: skip

    async def items(self, resource: str, namespace: str | None) -> list[dict[str, Any]]:
        return [await self.get(resource, "team", "researcher")]

    async def json(self, *args: str) -> Any:
        return {"items": []}

    async def run(self, *args: str) -> str:
        return "a log line"

    async def start(self, *args: str) -> Any:
        """kubectl port-forward as the console starts it: announces the port, runs on."""
        code = f"print('Forwarding from 127.0.0.1:{self.port} -> 8000', flush=True)"
        return await asyncio.create_subprocess_exec(
            sys.executable, "-c", f"{code}\nimport time\ntime.sleep(60)",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip


@pytest.fixture
async def console(request: pytest.FixtureRequest) -> AsyncIterator[TestClient[Any, Any]]:
    """The console in front of a stand-in agent of ``request.param``'s kind."""
    agent = TestServer(agent_app(request.param), host="127.0.0.1")
    await agent.start_server()
    fake = ForwardingCluster("kubectl", port=agent.port or 0, spec=SPEC)
    config = UiConfig(context="kind-kaos", namespace=None, hosts=None, csrf=CSRF)
    client: TestClient[Any, Any] = TestClient(TestServer(create_app(config, fake, watch=False)))
    await client.start_server()
    yield client
    await client.close()
    await agent.close()


def section(page: str, key: str) -> str:
    start = page.index(f'id="ops-{key}"')
    return page[start : page.index("</section>", start)]


@pytest.mark.parametrize("console", ["older"], indirect=True)
async def test_an_agent_from_before_the_feature_says_so_in_each_section(
    console: TestClient[Any, Any],
) -> None:
    resp = await console.get("/agents/team/researcher?principal=alice", headers=HTML)
    page = await resp.text()
    assert resp.status == 200
    assert "Agent researcher does not offer its token usage: GET /v1/usage answered 404" in (
        section(page, "usage")
    )
    assert "does not offer its audit trail: GET /v1/audit answered 404" in section(page, "audit")
    assert "Agent researcher answered 404 to ListTasks." in section(page, "approvals")
    # Schedules and triggers are the Agent's own: drawn whatever the agent says.
    assert 'data-schedule="nightly"' in page and "&lt;tidy&gt; up" in page
    assert "POST /v1/triggers/deploys" in page and "Secret hook, key token" in page


@pytest.mark.parametrize("console", ["refusing"], indirect=True)
async def test_an_agent_that_refuses_the_console_is_a_not_allowed_note(
    console: TestClient[Any, Any],
) -> None:
    page = await (await console.get("/agents/team/researcher", headers=HTML)).text()
    usage, audit = section(page, "usage"), section(page, "audit")
    assert "Not allowed: agent researcher answered 403 to GET /v1/usage: reading its token " \
        "usage needs get on agents/usage of this Agent (no)." in usage  # fmt: skip
    assert "needs get on agents/audit of this Agent" in audit
    assert 'class="problem tone-warn problem-' not in usage  # a check's note, not kubectl's
    assert "Not allowed: agent researcher answered 403 to ListTasks" in section(page, "approvals")


@pytest.mark.parametrize("console", ["paused"], indirect=True)
async def test_a_paused_task_is_drawn_escaped_and_a_refused_decision_changes_nothing(
    console: TestClient[Any, Any],
) -> None:
    page = await (await console.get("/agents/team/researcher?principal=alice", headers=HTML)).text()
    approvals = section(page, "approvals")
    assert approvals.count("<article") == 1 and 'data-task="t-1"' in approvals
    assert "&lt;script&gt;x&lt;/script&gt;" in approvals and "<script>x" not in approvals
    assert "pay: charge; delegation to billing" in approvals
    assert f'<input type="hidden" name="csrf" value="{CSRF}">' in approvals
    assert '<input type="hidden" name="principal" value="alice">' in approvals
    decide = "/agents/team/researcher/decide"
    form = {"task": "t-1", "decision": "approve", "principal": "bob", "csrf": CSRF}
    refused = await console.post(decide, data=form, headers=HTML)
    said = await refused.text()
    assert refused.status == 403 and "Nothing was decided" in said
    assert "nothing was decided: agent researcher refused: this principal may not decide it" in (
        said
    )
    no_token = await console.post(decide, data={**form, "csrf": ""}, headers=HTML)
    assert no_token.status == 403 and "CSRF" in await no_token.text()
    bad = await console.post(decide, data={**form, "decision": "maybe"}, headers=HTML)
    assert bad.status == 400 and "the decision must be approve or deny" in await bad.text()
    odd = await console.post(decide, data={**form, "task": "../x y"}, headers=HTML)
    assert odd.status == 400 and "a task id" in await odd.text()


def test_the_pending_calls_are_read_from_the_metadata_or_the_status_message() -> None:
    calls, deadline = pending_calls(PAUSED_TASK)
    assert [(c.tool, c.arguments, c.call_id) for c in calls] == [
        ("charge", {"to": "<script>x</script>"}, "c-1")
    ]
    assert deadline == "2026-12-06T19:00:00Z"
    approval = PAUSED_TASK["metadata"]["kaos.dev/approval"]  # type: ignore[index]
    in_message = {"id": "t-3", "status": {"message": {"parts": [
        {"text": "waits"}, {"data": {"approval": approval}}]}}}  # fmt: skip
    assert pending_calls(in_message) == (calls, deadline)
    assert paused_task(PAUSED_TASK).principal == "alice"
    assert pending_calls({"id": "t-4"}) == ((), None)


def test_a_section_that_could_not_be_read_is_drawn_with_its_note() -> None:
    note = Note("warn", "Agent a did not answer GET /v1/usage: timed out.", "probe")
    ops = Ops(Read(note=note), Read([]), Read(skipped="Not read: probe failed."), "2026-12-01")
    html = ops_html("team", "a", {}, {}, "", ops, principal="", csrf=CSRF, audit_shown=25)
    assert 'data-check="probe"' in section(html, "usage")
    assert 'id="audit-empty"' in section(html, "audit")
    assert 'id="paused-skipped"' in section(html, "approvals")
    assert "No tool of this agent needs an approval" in html
    assert 'id="schedules-empty"' in html and 'id="triggers-empty"' in html
