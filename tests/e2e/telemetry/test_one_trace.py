"""One conversation, followed in a real Jaeger: the local stack with tracing on.

The stack of ``make run`` (``tests.support.localstack``) in external mode, with every
sample resource's ``spec.telemetry`` pointing at a Jaeger v2 (``tests.fixtures.jaeger``):
the OTEL_* variables each process gets are the operator's own projection of that block,
as in a cluster. A second replica of the memory service runs beside the stack's on the
same database. Every assertion reads what Jaeger stored, through its query API.

- One chat turn through the coordinator that delegates to the researcher, which calls
  the MCP tool ``shout``, is one trace (the test sends its W3C ``traceparent``): both
  agents' ``invoke_agent``, the model calls, ``execute_tool``, the MCP server's span,
  the delegation client span with the researcher's server span under it, and the memory
  service's ``search_memory`` and ``update_memory``, with the conventions' attributes.
- The fold that turn's write recorded is worked by the second replica (the first dies
  holding the session's lease while the model hangs); its digest and extraction spans
  carry a span link to the write's ``update_memory`` span.
- A forget is a ``delete_memory`` span with the level and the counts it answered.
- The agent's ``/metrics`` has the GenAI token histograms with the devmodel's usage.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp
import pytest
from kaos_core.crds import Telemetry
from kaos_core.memory.client import MemoryServiceClient
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER
from kaos_devmodel.protocol import word_count

from tests.support.jaeger import CLIENT, SERVER, Jaeger, Span
from tests.support.localstack import (
    SCRIPT,
    STORY,
    LocalStack,
    Samples,
    load_samples,
    runtime_variables,
)
from tests.support.localstack.overlay import LEASE_TTL
from tests.support.postgres import create_database, drop_database, pg_query, unique_name
from tests.support.procs import ServiceProcess, console_script, free_port, start_service

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

T = TypeVar("T")
DEADLINE_S = 180.0
COLLECTION = "kaos_memory"  # the sample store's collection: gen_ai.memory.store.id
# The traced turn's answer is a long story, so the write after it folds the session.
TRACED_SCRIPT: list[dict[str, Any]] = [
    {**rule, "reply": "The researcher answered: {result}. " + STORY}
    if rule.get("after_tool") == "delegate_to_researcher"
    else rule
    for rule in SCRIPT
]


def traced_samples(endpoint: str) -> Samples:
    """The external samples with every resource's telemetry block set, as a user would."""
    block = Telemetry(endpoint=endpoint, sampling_ratio=1.0)
    samples = load_samples("external")

    def traced(resource: Any) -> Any:
        spec = resource.spec.model_copy(update={"telemetry": block})
        return resource.model_copy(update={"spec": spec})

    return dataclasses.replace(
        samples,
        model_api=traced(samples.model_api),
        mcp_servers={n: traced(s) for n, s in samples.mcp_servers.items()},
        store=traced(samples.store),
        agents={n: traced(a) for n, a in samples.agents.items()},
        patches=[*samples.patches, "every resource: spec.telemetry -> the test's Jaeger"],
    )


@dataclasses.dataclass
class Traced:
    stack: LocalStack
    replica: ServiceProcess  # the second memory replica, same database
    dsn: str
    jaeger: Jaeger


class ShortLeaseStack(LocalStack):
    """The stack with the store's leases short: the fold test kills the replica that holds
    one and waits for it to lapse (a minute by default). Both replicas read it."""

    def _replan(self) -> None:
        spec = self.plan[self.store_key]
        spec.overlay = {**spec.overlay, LEASE_TTL: "10"}


@pytest.fixture(scope="module")
def traced(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    jaeger: Jaeger,
) -> Iterator[Traced]:
    admin = request.getfixturevalue("pg_admin_dsn")
    name = unique_name()
    dsn = create_database(admin, name, template=request.getfixturevalue("pg_template_db"))
    root = tmp_path_factory.mktemp("traced-stack")
    stack = ShortLeaseStack(
        root, storage="external", dsn=dsn, samples=traced_samples(jaeger.otlp_endpoint)
    )
    replica: ServiceProcess | None = None
    try:
        stack.start()
        stack.devmodel.set_script(TRACED_SCRIPT)
        first = stack.plan[stack.store_key]
        port = free_port()
        env = {
            **dict.fromkeys(runtime_variables("kaos-memory"), ""),
            **first.env,
            "KAOS_MEMORY_PORT": str(port),
            # Sweeps often, so it finds the fold once the first replica's lease lapses.
            "KAOS_MEMORY_SWEEP_INTERVAL": "0.5",
        }
        replica = start_service(
            "memory-replica-2",
            [console_script("kaos-memory")],
            port=port,
            env=env,
            log_dir=root / "logs",
            timeout=120,
        )
        yield Traced(stack=stack, replica=replica, dsn=dsn, jaeger=jaeger)
    finally:
        if replica is not None:
            replica.stop(timeout=30)
        stack.stop()
        drop_database(admin, name)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def eventually(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        found = await probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not within {DEADLINE_S:.0f}s: {what}")
        await asyncio.sleep(0.25)  # polling interval of a deadline wait, not a synchronisation


async def turn(
    http: aiohttp.ClientSession,
    t: Traced,
    agent: str,
    principal: str,
    session: str,
    text: str,
    traceparent: str | None = None,
) -> str:
    headers = {SESSION_HEADER: session, PRINCIPAL_HEADER: principal}
    if traceparent is not None:
        headers["traceparent"] = traceparent
    body = {"model": "agent", "messages": [{"role": "user", "content": text}]}
    async with http.post(
        f"{t.stack.agent_url(agent)}/v1/chat/completions",
        json=body,
        headers=headers,
        timeout=aiohttp.ClientTimeout(total=120),
    ) as resp:
        doc = await resp.json(content_type=None)
        assert resp.status == 200, doc
        return str(doc["choices"][0]["message"]["content"])


def new_traceparent() -> tuple[str, str]:
    trace_id = secrets.token_hex(16)
    return trace_id, f"00-{trace_id}-{secrets.token_hex(8)}-01"


def ops(spans: list[Span], operation: str) -> list[Span]:
    return [s for s in spans if s.attr("gen_ai.operation.name") == operation]


def descends(spans: list[Span], child: Span, ancestor: Span) -> bool:
    by_id = {s.span_id: s for s in spans}
    node: Span | None = child
    while node is not None:
        if node.parent_id == ancestor.span_id:
            return True
        node = by_id.get(node.parent_id)
    return False


# --- the traced turn ------------------------------------------------------------------------


def complete(spans: list[Span]) -> bool:
    """Every kind of span the turn makes has arrived (each process exports in batches)."""
    agents = {s.attr("gen_ai.agent.name") for s in ops(spans, "invoke_agent") if s.kind != CLIENT}
    tools = {s.attr("gen_ai.tool.name") for s in ops(spans, "execute_tool")}
    return (
        {"coordinator", "researcher"} <= agents
        and {"delegate_to_researcher", "shout"} <= tools
        and any(s.kind == CLIENT for s in ops(spans, "invoke_agent"))
        and len(ops(spans, "chat")) >= 4
        and any(s.attr("mcp.method.name") == "tools/call" and s.kind == SERVER for s in spans)
        and bool(ops(spans, "search_memory"))
        and len(ops(spans, "update_memory")) >= 2
    )


@dataclasses.dataclass(frozen=True)
class Turn:
    trace_id: str
    session: str
    principal: str
    spans: list[Span]


@pytest.fixture(scope="module")
def delegated_turn(traced: Traced) -> Turn:
    """Two long answers, then the traced turn (delegation, MCP tool, a long answer whose
    write folds the session) while digest and extraction calls hang."""

    async def run() -> Turn:
        principal, session = "t-alice", "t-alice-1"
        async with aiohttp.ClientSession() as http:
            for chapter in (1, 2):
                await turn(
                    http,
                    traced,
                    "coordinator",
                    principal,
                    session,
                    f"Tell me the long story, {chapter}.",
                )
            # The first replica takes the fold and its model call hangs there.
            await traced.stack.devmodel.aset_faults(hang=True, routes=["digest", "extraction"])
            trace_id, traceparent = new_traceparent()
            answer = await turn(
                http,
                traced,
                "coordinator",
                principal,
                session,
                "Ask the researcher, please.",
                traceparent,
            )
        assert "HELLO FROM LISBON" in answer

        def spans() -> list[Span] | None:
            # Each process exports in its own batches: wait for every piece, then assert.
            found = traced.jaeger.query.trace(trace_id)
            return found if complete(found) else None

        found = await eventually(lambda: asyncio.to_thread(spans), "the turn's spans in Jaeger")
        return Turn(trace_id, session, principal, found)

    return asyncio.run(run())


def test_the_turn_is_one_trace_through_both_agents_the_tool_and_memory(
    traced: Traced, delegated_turn: Turn
) -> None:
    spans, session = delegated_turn.spans, delegated_turn.session
    assert {s.trace_id for s in spans} == {delegated_turn.trace_id}

    runs = {s.attr("gen_ai.agent.name"): s for s in ops(spans, "invoke_agent") if s.kind != CLIENT}
    assert {"coordinator", "researcher"} <= set(runs)
    for name, run in runs.items():
        assert run.service == name
        assert run.attr("gen_ai.conversation.id") == session  # the session, through delegation
    # Model calls: the coordinator's two (tool call, answer) and the researcher's two.
    chats = ops(spans, "chat")
    assert {s.service for s in chats} == {"coordinator", "researcher"}
    assert all(s.attr("gen_ai.request.model") for s in chats)
    assert len(chats) >= 4

    tools = {s.attr("gen_ai.tool.name"): s for s in ops(spans, "execute_tool") if s.kind != SERVER}
    assert {"delegate_to_researcher", "shout"} <= set(tools)
    assert tools["shout"].service == "researcher"

    # The MCP server's own span, under the researcher's tool call.
    mcp_name = next(iter(traced.stack.samples.mcp_servers))
    mcp = [s for s in spans if s.service == mcp_name and s.kind == SERVER]
    call = next(s for s in mcp if s.attr("mcp.method.name") == "tools/call")
    assert call.attr("gen_ai.tool.name") == "shout"
    assert descends(spans, call, tools["shout"])

    # Delegation: the coordinator's client span, the researcher's server span under it.
    delegation = next(
        s for s in ops(spans, "invoke_agent") if s.kind == CLIENT and s.service == "coordinator"
    )
    assert delegation.attr("gen_ai.agent.name") == "researcher"
    assert delegation.attr("kaos.delegation.transport") == "a2a"
    assert descends(spans, delegation, tools["delegate_to_researcher"])
    peer_server = next(
        s
        for s in spans
        if s.service == "researcher" and s.kind == SERVER and descends(spans, s, delegation)
    )
    assert descends(spans, runs["researcher"], peer_server)

    # Memory, on the GenAI memory conventions.
    store = traced.stack.store.name
    searches = [s for s in ops(spans, "search_memory") if s.service == store]
    writes = [s for s in ops(spans, "update_memory") if s.service == store]
    assert searches and writes
    for s in searches + writes:
        assert s.attr("gen_ai.memory.store.id") == COLLECTION
        assert s.attr("kaos.memory.scope.level") in ("session", "agent", "user")
        assert s.attr("gen_ai.conversation.id") == session
        # Content is opt-in: off here.
        assert s.attr("gen_ai.memory.query.text") is None
        assert s.attr("gen_ai.memory.records") is None
    assert all(isinstance(s.attr("kaos.memory.result.count"), int) for s in searches)
    assert all(s.attr("kaos.memory.turns") >= 1 for s in writes)
    assert any(s.attr("kaos.memory.scheduled") for s in writes)  # the write that folds
    # The resource attributes the operator projected.
    assert writes[0].resource["kaos.resource.kind"] == "MemoryStore"
    assert writes[0].resource["k8s.namespace.name"] == traced.stack.store.namespace


def test_the_fold_runs_on_the_second_replica_linked_to_the_write(
    traced: Traced, delegated_turn: Turn
) -> None:
    async def run() -> list[Span]:
        key = f"%run:{delegated_turn.session}"
        first = traced.stack.procs[traced.stack.store_key]

        def first_holds_a_lease() -> bool | None:
            rows = pg_query(
                traced.dsn, "SELECT owner FROM kaos_mem_leases WHERE key LIKE %s", (key,)
            )
            return True if any(f":{first.proc.pid}:" in r[0] for r in rows) else None

        await eventually(lambda: asyncio.to_thread(first_holds_a_lease), "the fold on replica 1")
        first.kill()  # dies holding the lease, its model call in flight
        await traced.stack.devmodel.aset_faults()  # the model answers again
        second = f":{traced.replica.proc.pid}:"

        def background() -> list[Span] | None:
            found = traced.jaeger.query.spans(traced.stack.store.name, since=started)
            mine = [
                s
                for s in found
                if s.name.startswith(("memory.digest", "memory.extract"))
                and second in str(s.attr("kaos.memory.replica"))
            ]
            steps = {s.name.split()[0] for s in mine}
            return mine if steps == {"memory.digest", "memory.extract"} else None

        return await eventually(lambda: asyncio.to_thread(background), "replica 2's fold spans")

    started = datetime.now(UTC)
    spans = asyncio.run(run())
    writes = {s.span_id for s in ops(delegated_turn.spans, "update_memory")}
    for span in spans:
        assert span.attr("gen_ai.memory.store.id") == COLLECTION
        assert span.attr("kaos.memory.session") == delegated_turn.session
        linked = [sid for tid, sid in span.links if tid == delegated_turn.trace_id]
        assert linked and set(linked) <= writes, (span.name, span.links)
        assert span.trace_id != delegated_turn.trace_id  # its own trace, linked, not a child


def test_forget_is_delete_memory_with_level_and_counts(
    traced: Traced, delegated_turn: Turn
) -> None:
    async def run() -> Any:
        # On the second replica: the first may be gone (the fold test kills it).
        async with MemoryServiceClient(
            traced.replica.url, agent_identity=traced.stack.identity("coordinator")
        ) as mem:
            return await mem.forget(
                "session",
                principal=delegated_turn.principal,
                session_id=delegated_turn.session,
                failure_mode="strict",
            )

    since = datetime.now(UTC)
    result = asyncio.run(run())
    assert not result.degraded and result.forgotten.short_term > 0

    def deleted() -> Span | None:
        found = traced.jaeger.query.spans(traced.stack.store.name, since=since)
        return next((s for s in ops(found, "delete_memory")), None)

    span = asyncio.run(eventually(lambda: asyncio.to_thread(deleted), "the delete_memory span"))
    assert span.name == f"delete_memory {COLLECTION}"
    assert span.attr("gen_ai.memory.store.id") == COLLECTION
    assert span.attr("kaos.memory.scope.level") == "session"
    assert span.attr("gen_ai.conversation.id") == delegated_turn.session
    assert span.attr("kaos.memory.deleted.turns") == result.forgotten.short_term
    assert span.attr("kaos.memory.deleted.digests") == result.forgotten.medium_term
    assert span.attr("kaos.memory.deleted.facts") == result.forgotten.long_term


def _histogram(text: str, name: str, agent: str, **labels: str) -> tuple[float, float]:
    """(count, sum) of one series of a Prometheus histogram in ``text``."""
    wanted = {"gen_ai_agent_name": agent, **labels}
    out = {"count": 0.0, "sum": 0.0}
    for line in text.splitlines():
        m = re.match(rf"^{name}_(count|sum)\{{(.*)\}} (\S+)$", line)
        if not m:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if all(found.get(k) == v for k, v in wanted.items()):
            out[m.group(1)] += float(m.group(3))
    return out["count"], out["sum"]


PROMPT = "Hello metrics, one two three"


def test_token_usage_of_a_chat_turn_is_on_metrics(traced: Traced) -> None:
    url = traced.stack.agent_url("coordinator")

    async def run() -> tuple[str, str, str, list[dict[str, Any]]]:
        async with aiohttp.ClientSession() as http:
            before = await (await http.get(f"{url}/metrics")).text()
            await traced.stack.devmodel.areset()
            await traced.stack.devmodel.aset_script(TRACED_SCRIPT)
            answer = await turn(http, traced, "coordinator", "m-bob", "m-bob-1", PROMPT)
            after = await (await http.get(f"{url}/metrics")).text()
            return before, after, answer, await traced.stack.devmodel.arequests()

    before, after, answer, requests = asyncio.run(run())
    calls = [r for r in requests if r["kind"] not in ("digest", "extraction")]
    assert len(calls) == 1  # an echo: one model request, no tool
    assert calls[0]["messages"][-1]["content"] == PROMPT
    prompt = sum(word_count(m["content"] or "") for m in calls[0]["messages"])
    name = "gen_ai_client_token_usage"
    for token_type, expected in (("input", prompt), ("output", word_count(answer))):
        c0, s0 = _histogram(before, name, "coordinator", gen_ai_token_type=token_type)
        c1, s1 = _histogram(after, name, "coordinator", gen_ai_token_type=token_type)
        assert (c1 - c0, s1 - s0) == (1, expected), token_type
    c0, _ = _histogram(before, "gen_ai_client_operation_duration_seconds", "coordinator")
    c1, s1 = _histogram(after, "gen_ai_client_operation_duration_seconds", "coordinator")
    assert c1 - c0 == 1 and s1 > 0
