"""The audit trail on real parts: the development model scripts the tool calls, a real MCP
tool server (``kaos-mcp``) runs them, agents are real processes (or the app served in the
test's loop where the test needs to reach its store), and ``GET /v1/audit`` is asked over
HTTP. Checked: every call of a multi-step run, in order, with the run's user, session and
task, each with the digest of its arguments and the arguments only when the Agent opts in;
a delegation under the peer's name; the verified user under verified user identity, who
reads only their own entries; the store beside the task store in every mode (a second
replica on PostgreSQL reads what the first wrote); the retention sweep; a failed write
counted while the run goes on; a bad query refused."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from kaos_agent.audit.log import AuditEntry
from kaos_agent.audit_trail.pg_log import PostgresAuditLog
from kaos_agent.audit_trail.sqlite_log import SqliteAuditLog

from tests.fixtures.agent import AgentFactory, McpFactory, agent_env, serve_agent
from tests.support.devmodel import DevModel
from tests.support.oidc import Provider
from tests.support.procs import ServiceProcess, console_script, free_port

TOOLS = '''
def forecast(city: str) -> str:
    """Weather forecast for a city."""
    return f"sunny in {city}"

def explode(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"exploded: {reason}")
'''

OSLO = {"city": "Oslo"}
ROME = {"city": "Rome"}
BOOM = {"reason": "on purpose"}
# Three tool calls, one failing, then the answer: four model requests.
MULTI_STEP: list[dict[str, Any]] = [
    {"match": "^plan a trip", "tool_call": {"name": "forecast", "arguments": OSLO}},
    {"after_tool": "forecast", "times": 1, "tool_call": {"name": "explode", "arguments": BOOM}},
    {"after_tool": "explode", "tool_call": {"name": "forecast", "arguments": ROME}},
    {"after_tool": "forecast", "reply": "Trip planned: {result}"},
]
CALLS = [("forecast", OSLO, "ok"), ("explode", BOOM, "failed"), ("forecast", ROME, "ok")]


def canonical(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(arguments: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(arguments).encode()).hexdigest()


async def chat(url: str, text: str, **headers: str) -> str:
    async with openai.AsyncOpenAI(base_url=url + "/v1", api_key="x", default_headers=headers) as oa:
        answer = await oa.chat.completions.create(
            model="a", messages=[{"role": "user", "content": text}]
        )
    return answer.choices[0].message.content or ""


async def audit(
    url: str, headers: dict[str, str] | None = None, **query: str
) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(url + "/v1/audit", params=query, headers=headers or {}) as resp,
    ):
        return resp.status, await resp.json()


async def items(url: str, **query: str) -> list[dict[str, Any]]:
    status, body = await audit(url, **query)
    assert status == 200, body
    found: list[dict[str, Any]] = body["items"]
    return found


async def metrics(url: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(url + "/metrics") as resp:
        return await resp.text()


def assert_calls(found: list[dict[str, Any]], *, user: str, arguments: bool) -> None:
    assert [(e["kind"], e["name"], e["outcome"]) for e in found] == [
        ("tool", name, outcome) for name, _, outcome in CALLS
    ]
    for entry, (_, args, _) in zip(found, CALLS, strict=True):
        assert entry["user"] == user
        assert entry["identity"] == user  # not a delegation: the caller is the user
        assert entry["argumentsDigest"] == digest(args)
        if arguments:
            assert entry["arguments"] == canonical(args)
        else:
            assert "arguments" not in entry
        assert entry["durationMs"] >= 0
    starts = [e["at"] for e in found]
    assert starts == sorted(starts)


@pytest.fixture
def tools(mcp_server_factory: McpFactory) -> ServiceProcess:
    return mcp_server_factory(TOOLS)


async def test_a_multi_step_run_lists_every_tool_call_in_order_without_arguments(
    agent_factory: AgentFactory, tools: ServiceProcess, devmodel: DevModel
) -> None:
    agent = agent_factory("audited", MCP_SERVERS=f"weather:{tools.url}")
    devmodel.set_script(MULTI_STEP)
    before = time.time()
    answer = await chat(agent.url, "plan a trip", **{"X-Principal": "alice", "X-Session-Id": "s1"})
    assert answer == "Trip planned: sunny in Rome"

    found = await items(agent.url)
    assert_calls(found, user="alice", arguments=False)
    assert {e["session"] for e in found} == {"s1"}
    assert {e["agent"] for e in found} == {"audited"}
    assert all("task" not in e for e in found)  # chat completions: no A2A task
    assert before <= found[0]["at"] <= time.time()
    # The window: since the second call, and the latest one only.
    assert [e["name"] for e in await items(agent.url, since=str(found[1]["at"]))] == [
        "explode",
        "forecast",
    ]
    assert [e["argumentsDigest"] for e in await items(agent.url, limit="1")] == [digest(ROME)]
    assert await items(agent.url, until=str(found[0]["at"])) == []


async def test_arguments_are_recorded_when_the_agent_opts_in(
    agent_factory: AgentFactory, tools: ServiceProcess, devmodel: DevModel
) -> None:
    agent = agent_factory(
        "open-book", MCP_SERVERS=f"weather:{tools.url}", AGENT_AUDIT_RECORD_ARGUMENTS="true"
    )
    devmodel.set_script(MULTI_STEP)
    await chat(agent.url, "plan a trip", **{"X-Principal": "carol"})
    assert_calls(await items(agent.url), user="carol", arguments=True)


async def a2a_send(url: str, text: str, principal: str) -> dict[str, Any]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]},
            "configuration": {"blocking": True},
        },
    }
    headers = {"X-Principal": principal, "A2A-Version": "1.0"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(url + "/", json=body, headers=headers) as r,
    ):
        answer: dict[str, Any] = await r.json()
    task: dict[str, Any] = answer["result"]["task"]
    return task


async def test_an_a2a_run_records_its_task_and_the_trail_filters_by_it(
    agent_factory: AgentFactory, tools: ServiceProcess, devmodel: DevModel
) -> None:
    agent = agent_factory("tasked", MCP_SERVERS=f"weather:{tools.url}")
    devmodel.set_script(MULTI_STEP)
    task = await a2a_send(agent.url, "plan a trip", "dave")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    devmodel.set_script(MULTI_STEP)
    await chat(agent.url, "plan a trip", **{"X-Principal": "dave"})

    assert len(await items(agent.url)) == 6
    found = await items(agent.url, task=task["id"])
    assert_calls(found, user="dave", arguments=False)
    assert {(e["task"], e["session"]) for e in found} == {(task["id"], task["contextId"])}


async def test_a_delegation_is_recorded_under_the_peers_name(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    b = agent_factory("b")
    a = agent_factory("a", AGENT_SUB_AGENTS=f"b:{b.url}", AGENT_AUDIT_RECORD_ARGUMENTS="true")
    devmodel.set_script(
        [
            {
                "match": "^ask b",
                "tool_call": {"name": "delegate_to_b", "arguments": {"message": "code 4711"}},
            },
            {"after_tool": "delegate_to_b", "reply": "B said: {result}"},
        ]
    )
    assert await chat(a.url, "ask b", **{"X-Principal": "erin"}) == "B said: Echo: code 4711"
    (entry,) = await items(a.url)
    assert (entry["kind"], entry["name"], entry["outcome"]) == ("delegation", "b", "ok")
    assert entry["user"] == "erin"
    assert entry["arguments"] == canonical({"message": "code 4711"})
    # B called no tool: its trail is empty.
    assert await items(b.url) == []


async def test_a_failed_delegation_is_recorded_as_an_error(
    agent_factory: AgentFactory, devmodel: DevModel
) -> None:
    a = agent_factory("lonely", AGENT_SUB_AGENTS=f"gone:http://127.0.0.1:{free_port()}")
    devmodel.set_script(
        [
            {
                "match": "^ask",
                "tool_call": {"name": "delegate_to_gone", "arguments": {"message": "x"}},
            },
            {"after_tool": "delegate_to_gone", "reply": "no luck"},
        ]
    )
    assert await chat(a.url, "ask gone") == "no luck"
    (entry,) = await items(a.url)
    assert (entry["kind"], entry["name"], entry["outcome"]) == ("delegation", "gone", "error")


# ------------------------------------------------------------------ verified users


def user_env(provider: Provider) -> dict[str, object]:
    return {
        "AGENT_AUTH_MODE": "jwks",
        "AGENT_AUTH_ISSUER": provider.issuer,
        "AGENT_AUTH_CA_FILE": provider.ca_file,
        "AGENT_USER_ISSUER": provider.issuer,
        "AGENT_USER_AUDIENCE": "kaos",
        "AGENT_USER_CA_FILE": provider.ca_file,
    }


async def test_under_verified_identity_the_trail_has_the_verified_user_who_reads_their_own(
    agent_factory: AgentFactory, tools: ServiceProcess, devmodel: DevModel, oidc_provider: Provider
) -> None:
    agent = agent_factory("verified", MCP_SERVERS=f"weather:{tools.url}", **user_env(oidc_provider))
    alice = {
        "Authorization": f"Bearer {oidc_provider.token('alice', audience='kaos').access_token}"
    }
    bob = {"Authorization": f"Bearer {oidc_provider.token('bob', audience='kaos').access_token}"}
    devmodel.set_script(MULTI_STEP)
    assert await chat(agent.url, "plan a trip", **alice) == "Trip planned: sunny in Rome"

    status, body = await audit(agent.url, alice)
    assert status == 200, body
    assert_calls(body["items"], user="alice", arguments=False)
    # Without AGENT_RBAC a user reads only their own entries; without a token, nothing.
    assert await audit(agent.url, bob) == (200, {"items": []})
    status, body = await audit(agent.url)
    assert status == 401 and "items" not in body
    status, body = await audit(agent.url, {**alice, "X-Principal": "bob"})
    assert status == 400 and "items" not in body


# ------------------------------------------------------------------ stores


async def test_replicas_on_postgresql_share_one_trail(
    tmp_path: Path, tools: ServiceProcess, devmodel: DevModel, pg_dsn: str
) -> None:
    env = {
        "MCP_SERVERS": f"weather:{tools.url}",
        "TASK_STORE_TYPE": "external",
        "TASK_STORE_DSN": pg_dsn,
    }
    first, second = free_port(), free_port()
    async with (
        serve_agent(agent_env(devmodel, first, "shared", **env)),
        serve_agent(agent_env(devmodel, second, "shared", **env)),
    ):
        devmodel.set_script(MULTI_STEP)
        await chat(f"http://127.0.0.1:{first}", "plan a trip", **{"X-Principal": "frank"})
        assert_calls(await items(f"http://127.0.0.1:{second}"), user="frank", arguments=False)


def store_env(mode: str, tmp_path: Path, pg_dsn: str | None) -> dict[str, str]:
    if mode == "external":
        assert pg_dsn is not None
        return {"TASK_STORE_TYPE": "external", "TASK_STORE_DSN": pg_dsn}
    return {"TASK_STORE_TYPE": "local", "TASK_STORE_PATH": str(tmp_path / "tasks.db")}


def entry_at(at: float, name: str) -> AuditEntry:
    return AuditEntry(at=at, kind="tool", name=name, outcome="ok", user="gina")


async def sweep_at_start(tmp_path: Path, devmodel: DevModel, pg_dsn: str | None) -> list[str]:
    """Entries 8 and 6 days old and a new one written to the store, then an agent keeping
    7 days started on it: the names it lists."""
    env = store_env("external" if pg_dsn else "local", tmp_path, pg_dsn)
    log = PostgresAuditLog(pg_dsn) if pg_dsn else SqliteAuditLog(Path(env["TASK_STORE_PATH"]))
    now = time.time()
    await log.start()
    try:
        for at, name in ((now - 8 * 86400, "stale"), (now - 6 * 86400, "kept"), (now, "new")):
            await log.append(entry_at(at, name))
        assert [e.name for e in await log.query()] == ["stale", "kept", "new"]
    finally:
        await log.close()
    port = free_port()
    agent = agent_env(devmodel, port, "forgetful", AGENT_AUDIT_RETENTION_DAYS=7, **env)
    async with serve_agent(agent):
        # The sweep runs as the agent starts.
        return [e["name"] for e in await items(f"http://127.0.0.1:{port}")]


async def test_the_retention_sweep_deletes_old_entries_in_sqlite(
    tmp_path: Path, devmodel: DevModel
) -> None:
    assert await sweep_at_start(tmp_path, devmodel, None) == ["kept", "new"]


async def test_the_retention_sweep_deletes_old_entries_in_postgresql(
    tmp_path: Path, devmodel: DevModel, pg_dsn: str
) -> None:
    assert await sweep_at_start(tmp_path, devmodel, pg_dsn) == ["kept", "new"]


async def test_a_failed_write_is_counted_and_the_run_goes_on(
    tmp_path: Path, tools: ServiceProcess, devmodel: DevModel
) -> None:
    env = {"MCP_SERVERS": f"weather:{tools.url}", **store_env("local", tmp_path, None)}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    async with serve_agent(agent_env(devmodel, port, "broken", **env)):
        # The table taken away under the running agent: every write fails.
        with sqlite3.connect(tmp_path / "tasks.db") as db:
            db.execute("DROP TABLE kaos_agent_audit")
        devmodel.set_script(MULTI_STEP)
        assert await chat(url, "plan a trip") == "Trip planned: sunny in Rome"
        assert "kaos_agent_audit_write_failures_total 3.0" in await metrics(url)
        status, body = await audit(url)
        assert status == 503 and "items" not in body


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ({"since": "yesterday"}, "'since' must be"),
        ({"until": "2026-13-01"}, "'until' must be"),
        ({"limit": "0"}, "'limit' must be"),
        ({"limit": "many"}, "'limit' must be"),
        ({"since": "2026-12-02", "until": "2026-12-01"}, "'until' must be after 'since'"),
        ({"user": "alice"}, "unknown query parameter 'user'"),
    ],
)
async def test_a_bad_query_is_400_naming_the_parameter(
    devmodel: DevModel, query: dict[str, str], fragment: str
) -> None:
    port = free_port()
    async with serve_agent(agent_env(devmodel, port, "strict")):
        status, body = await audit(f"http://127.0.0.1:{port}", **query)
    assert status == 400
    assert body["error"]["code"] == "invalid_query"
    assert fragment in body["error"]["message"]


async def test_kaos_agent_audit_prints_the_trail(
    agent_factory: AgentFactory, tools: ServiceProcess, devmodel: DevModel
) -> None:
    agent = agent_factory("listed", MCP_SERVERS=f"weather:{tools.url}")
    devmodel.set_script(MULTI_STEP)
    await chat(agent.url, "plan a trip", **{"X-Principal": "hank"})
    as_json = kaos("agent", "audit", "listed", "--url", agent.url, "--since", "1h", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == {"items": await items(agent.url)}
    as_table = kaos("agent", "audit", "listed", "--url", agent.url, "--limit", "2")
    assert as_table.returncode == 0, as_table.stderr
    lines = as_table.stdout.splitlines()
    assert lines[0].split() == [
        "TIME",
        "KIND",
        "NAME",
        "OUTCOME",
        "USER",
        "TASK",
        "MS",
        "ARGUMENTS",
    ]
    assert [line.split()[2:5] for line in lines[1:]] == [
        ["explode", "failed", "hank"],
        ["forecast", "ok", "hank"],
    ]
    assert lines[2].split()[-1] == f"sha256:{digest(ROME)[:12]}"
    future = kaos("agent", "audit", "listed", "--url", agent.url, "--since", "2999-01-01")
    assert (future.returncode, future.stdout.strip()) == (
        0,
        "agent listed has no audit entries for this query",
    )
    bad = kaos("agent", "audit", "listed", "--url", agent.url, "--since", "soon")
    assert bad.returncode != 0
    assert "agent answered 400: 'since' must be" in bad.stderr


def kaos(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [console_script("kaos"), *argv], capture_output=True, text=True, timeout=60, check=False
    )
