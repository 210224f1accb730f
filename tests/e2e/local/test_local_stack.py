"""The whole stack of ``make run`` on loopback, asserted step by step.

One stack per module and storage mode (``tests.support.localstack``): the devmodel as
the ModelAPI, the sample MCPServer, the sample MemoryStore (local; external on the
project's PostgreSQL) and the two sample Agents, each process started with the
environment the operator's desired-state functions give its resource. Tests keep out of
each other's way by principal and session; the scripted model (``SCRIPT``) is the one
``make run`` uses.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import pytest
from kaos_agent.memory.remote import FACTS_HEADER
from kaos_core.crds.agent import Agent
from kaos_memory.scope import conversation_key
from kaos_operator.desired import AgentContext, Endpoint, MemoryStoreContext
from kaos_operator.desired import agent_env as desired_agent_env
from kaos_operator.desired.mcpserver import mcp_env
from kaos_operator.desired.memorystore import memory_store_env
from kaos_operator.settings import OperatorSettings

from tests.support.localstack import (
    DELEGATED_MESSAGE,
    EMBEDDINGS,
    OVERLAY,
    SCRIPT,
    WORD_COUNT_TEXT,
    LocalStack,
    Reply,
    chat,
    model_request,
    process_settings_env,
)
from tests.support.postgres import create_database, drop_database, unique_name

T = TypeVar("T")
FOLD_DEADLINE_S = 120.0
# The variables whose local value may differ from the pod's: addresses, nothing else.
ADDRESS_KEYS = {
    "AGENT_HOST",
    "AGENT_PORT",
    "AGENT_PUBLIC_URL",
    "MODEL_API_URL",
    "MCP_SERVERS",
    "AGENT_SUB_AGENTS",
    "MEMORY_ENDPOINT",
    "MCP_HOST",
    "MCP_PORT",
    "MCP_ALLOWED_HOSTS",
    "KAOS_MEMORY_HOST",
    "KAOS_MEMORY_PORT",
    "KAOS_MEMORY_DATA_DIR",
    "KAOS_MEMORY_MODEL_BASE_URL",
    "KAOS_MEMORY_EMBEDDING_BASE_URL",
}


@pytest.fixture(
    scope="module",
    params=["local", pytest.param("external", marks=pytest.mark.postgres)],
)
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LocalStack]:
    storage = request.param
    dsn = admin = name = None
    if storage == "external":
        admin = request.getfixturevalue("pg_admin_dsn")
        name = unique_name()
        dsn = create_database(admin, name, template=request.getfixturevalue("pg_template_db"))
    st = LocalStack(tmp_path_factory.mktemp(f"stack-{storage}"), storage=storage, dsn=dsn)
    try:
        st.start()
        st.devmodel.set_script(SCRIPT)
        yield st
    finally:
        st.stop()
        if admin is not None and name is not None:
            drop_database(admin, name)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def eventually(probe: Callable[[], Awaitable[T | None]], what: str) -> T:
    """Poll ``probe`` until it returns something, or fail after the fold deadline."""
    deadline = time.monotonic() + FOLD_DEADLINE_S
    while True:
        found = await probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"not within {FOLD_DEADLINE_S:.0f}s: {what}")
        await asyncio.sleep(0.2)  # polling interval of a deadline wait, not a synchronisation


async def ask(
    http: aiohttp.ClientSession,
    stack: LocalStack,
    agent: str,
    principal: str,
    session: str,
    text: str,
) -> Reply:
    reply = await chat(http, stack.agent_url(agent), text, session=session, principal=principal)
    assert reply.status == 200, reply.body
    assert reply.session == session
    return reply


async def facts(stack: LocalStack, agent: str, principal: str) -> list[str]:
    async with stack.memory_client(agent) as mem:
        listed = await mem.list("agent", principal=principal, include=["long_term"])
    assert not listed.degraded
    return [f.text for f in listed.long_term.facts]


async def metrics(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(url + "/metrics") as resp:
        assert resp.status == 200
        return await resp.text()


async def last_model_request(stack: LocalStack, prompt: str) -> dict[str, Any]:
    req = model_request(await stack.devmodel.arequests(), prompt)
    assert req is not None, f"the model never saw {prompt!r}"
    return req


def system_text(req: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in req["messages"] if m["role"] == "system")


@dataclass(frozen=True)
class Folded:
    principal: str
    session: str
    fact: str


async def fold_session(
    http: aiohttp.ClientSession, stack: LocalStack, principal: str, session: str, fact: str
) -> Folded:
    """Tell the coordinator ``fact``, then push the session past the store's token budget
    with long answers and wait until its digest exists and ``fact`` is a long-term fact."""
    await ask(http, stack, "coordinator", principal, session, fact)
    for chapter in (1, 2, 3):
        await ask(
            http, stack, "coordinator", principal, session, f"Tell me the long story, {chapter}."
        )

    async def extracted() -> bool | None:
        return True if fact in await facts(stack, "coordinator", principal) else None

    await eventually(extracted, f"{fact!r} extracted for {principal}")
    return Folded(principal, session, fact)


@pytest.fixture(scope="module")
def alice_folded(stack: LocalStack) -> Folded:
    async def run() -> Folded:
        async with aiohttp.ClientSession() as session:
            return await fold_session(session, stack, "f-alice", "f-alice-1", "I live in Lisbon.")

    return asyncio.run(run())


# --- the environment -------------------------------------------------------------------------


def _expected_env(stack: LocalStack, key: str) -> dict[str, str]:
    """The desired-state function's output for this process's resource, built here from the
    samples and the stack's loopback addresses (not from the launcher's plan)."""
    spec = stack.plan[key]
    kind, name = key.split("/", 1)
    operator = OperatorSettings.from_env({})
    api = stack.samples.model_api
    model = api.spec.served_models()[0]
    if kind == "MCPServer":
        server = stack.samples.mcp_servers[name]
        return mcp_env(
            server, host="127.0.0.1", port=spec.port, extra_allowed_hosts=("127.0.0.1:*",)
        )
    if kind == "MemoryStore":
        store = stack.store
        ctx = MemoryStoreContext(
            images=operator.images,
            posture=operator.posture,
            model_api_url=stack.url("devmodel"),
            embedding_model_api_url=stack.url(EMBEDDINGS),
            summarization_model=store.spec.models.summarization.model or model,
            embedding_model=store.spec.models.embedding.model or model,
            listen_host="127.0.0.1",
            listen_port=spec.port,
            data_dir=spec.env["KAOS_MEMORY_DATA_DIR"],
        )
        return memory_store_env(store, ctx)
    agent: Agent = stack.samples.agents[name]
    ctx_agent = AgentContext(
        images=operator.images,
        posture=operator.posture,
        model_api_url=stack.url("devmodel"),
        model_name=agent.spec.model or model,
        mcp_servers=tuple(
            Endpoint(m, stack.url(f"MCPServer/{m}") + "/mcp") for m in agent.spec.mcp_servers
        ),
        sub_agents=tuple(Endpoint(p, stack.agent_url(p)) for p in agent.spec.agent_network.access),
        memory_endpoint=stack.memory_url,
        store_ceiling=stack.store.spec.max_read_scope,
        listen_host="127.0.0.1",
        listen_port=spec.port,
        public_url=stack.agent_url(name),
    )
    return desired_agent_env(agent, ctx_agent)


def test_every_sample_resource_runs_as_a_process(stack: LocalStack) -> None:
    assert set(stack.procs) == {
        "devmodel",
        EMBEDDINGS,
        f"MemoryStore/{stack.store.name}",
        "MCPServer/text-tools",
        "Agent/researcher",
        "Agent/coordinator",
    }
    assert all(p.alive() for p in stack.procs.values())
    assert stack.store.spec.storage.type == stack.storage


def test_each_process_has_exactly_the_desired_state_env_plus_the_overlay(
    stack: LocalStack,
) -> None:
    checked = 0
    for key, proc in stack.procs.items():
        spec = stack.plan[key]
        if key in ("devmodel", EMBEDDINGS):
            continue  # no resource of its own: it runs the sample Deployment's command
        running = process_settings_env(proc.proc.pid, spec.program)
        assert set(spec.overlay) <= set(OVERLAY), key
        expected = {**_expected_env(stack, key), **spec.overlay}
        assert running == expected, key
        checked += 1
    assert checked == 4
    store_overlay = stack.plan[f"MemoryStore/{stack.store.name}"].overlay
    assert set(store_overlay) == ({"KAOS_MEMORY_DSN"} if stack.storage == "external" else set())


def test_local_env_differs_from_the_pods_only_in_addresses(stack: LocalStack) -> None:
    for key, spec in stack.plan.items():
        if not spec.desired:
            continue
        # Same variables as the pod; the pod's Secret references are the overlay, and its
        # own fields (its name) the local process does without.
        secret_refs = {k for k, v in spec.cluster.items() if v.startswith("<Secret ")}
        pod_fields = {k for k, v in spec.cluster.items() if v.startswith("<pod field ")}
        assert set(spec.desired) == set(spec.cluster) - secret_refs - pod_fields, key
        assert secret_refs == set(spec.overlay), key
        differing = {k for k, v in spec.desired.items() if spec.cluster[k] != v}
        assert differing <= ADDRESS_KEYS, key
        # No URL points into a cluster (the MCP server still accepts its pod's Host names).
        assert not [k for k, v in spec.env.items() if "://" in v and ".svc" in v], key


# --- the conversation --------------------------------------------------------------------------


async def test_window_is_replayed_within_a_session(
    stack: LocalStack, http: aiohttp.ClientSession
) -> None:
    await ask(http, stack, "coordinator", "w-alice", "w-1", "I live in Porto.")
    await ask(http, stack, "coordinator", "w-alice", "w-1", "I like trams.")
    reply = await ask(http, stack, "coordinator", "w-alice", "w-1", "What did I say?")

    assert reply.text == "Echo: What did I say?"
    req = await last_model_request(stack, "What did I say?")
    turns = [(m["role"], m["content"]) for m in req["messages"] if m["role"] != "system"]
    assert turns == [
        ("user", "I live in Porto."),
        ("assistant", "Echo: I live in Porto."),
        ("user", "I like trams."),
        ("assistant", "Echo: I like trams."),
        ("user", "What did I say?"),
    ]
    async with stack.memory_client("coordinator") as mem:
        r = await mem.recall("session", "", session_id="w-1", principal="w-alice")
    assert [t.content for t in r.short_term.window][-2:] == [
        "What did I say?",
        "Echo: What did I say?",
    ]
    assert len(r.short_term.window) == 6
    # Another session of the same principal starts empty.
    await ask(http, stack, "coordinator", "w-alice", "w-2", "What did I say, again?")
    req = await last_model_request(stack, "What did I say, again?")
    assert [m["content"] for m in req["messages"] if m["role"] == "user"] == [
        "What did I say, again?"
    ]


async def test_tool_call_result_is_in_the_answer(
    stack: LocalStack, http: aiohttp.ClientSession
) -> None:
    reply = await ask(http, stack, "researcher", "t-alice", "t-1", "How many words are here?")

    assert reply.text == f"word_count returned {len(WORD_COUNT_TEXT.split())}"
    req = await last_model_request(stack, "How many words are here?")
    assert {"shout", "word_count"} <= set(req["tools"])
    assert 'kaos_agent_tool_calls_total{outcome="ok",tool="word_count"}' in await metrics(
        http, stack.agent_url("researcher")
    )


async def test_delegation_reaches_the_second_agent(
    stack: LocalStack, http: aiohttp.ClientSession
) -> None:
    reply = await ask(http, stack, "coordinator", "d-alice", "d-1", "Ask the researcher, please.")

    assert reply.text == "The researcher answered: shout returned HELLO FROM LISBON"
    assert (
        'kaos_agent_delegations_total{outcome="ok",peer="researcher",transport="a2a"}'
        in await metrics(http, stack.agent_url("coordinator"))
    )
    assert 'kaos_agent_runs_total{entry="a2a",outcome="ok"}' in await metrics(
        http, stack.agent_url("researcher")
    )
    # The researcher's own model request: its MCP tools, the delegated message.
    req = await last_model_request(stack, DELEGATED_MESSAGE)
    assert {"shout", "word_count"} <= set(req["tools"])
    assert not any(t.startswith("delegate_to_") for t in req["tools"])
    # It remembered the task under its own identity, for the caller's principal and session.
    rows = [
        t
        for t in stack.memory_db.turns()
        if t["agent"] == stack.identity("researcher") and t["principal"] == "d-alice"
    ]
    assert [t["content"] for t in rows if t["role"] == "user"] == [DELEGATED_MESSAGE]
    assert {t["key"] for t in rows} == {
        conversation_key(stack.store.spec.collection, "d-1", "d-alice")
    }


async def test_digest_after_folding(stack: LocalStack, alice_folded: Folded) -> None:
    async with stack.memory_client("coordinator") as mem:
        r = await mem.recall(
            "session", "", session_id=alice_folded.session, principal=alice_folded.principal
        )
    assert r.medium_term.version is not None and r.medium_term.version >= 1
    assert r.medium_term.summary is not None
    assert "User said: I live in Lisbon." in r.medium_term.summary.splitlines()
    key = conversation_key(
        stack.store.spec.collection, alice_folded.session, alice_folded.principal
    )
    digests = [d for d in stack.memory_db.digests() if d["key"] == key]
    assert [d["version"] for d in digests][-1] == r.medium_term.version
    turns = [t for t in stack.memory_db.turns() if t["key"] == key]
    folded = [t for t in turns if t["folded_by"] is not None]
    assert folded and folded[0]["content"] == "I live in Lisbon."
    # The window is what stayed unfolded, within the store's budget.
    assert len(r.short_term.window) == len(turns) - len(folded)


async def test_long_term_fact_is_recalled_in_a_new_session(
    stack: LocalStack, http: aiohttp.ClientSession, alice_folded: Folded
) -> None:
    reply = await ask(
        http, stack, "coordinator", alice_folded.principal, "f-alice-2", "Where do I live?"
    )

    # Each fact with where it came from: alice said it, on the day she said it.
    line = re.compile(r"- I live in Lisbon\. \(stated by the user, \d{4}-\d{2}-\d{2}\)")
    assert any(line.fullmatch(text) for text in reply.text.splitlines()), reply.text
    req = await last_model_request(stack, "Where do I live?")
    assert FACTS_HEADER in system_text(req)
    assert any(line.fullmatch(text) for text in system_text(req).splitlines())
    # Not the old window: the new session's request has only its own user message.
    assert [m["content"] for m in req["messages"] if m["role"] == "user"] == ["Where do I live?"]


async def test_principals_are_isolated(
    stack: LocalStack, http: aiohttp.ClientSession, alice_folded: Folded
) -> None:
    reply = await ask(http, stack, "coordinator", "f-bob", "f-bob-1", "Where do I live?")

    assert reply.text == "From long-term memory:\nNo matching memories."
    req = await last_model_request(stack, "Where do I live?")
    assert FACTS_HEADER not in system_text(req)
    assert "Lisbon" not in str(req["messages"])
    assert await facts(stack, "coordinator", "f-bob") == []
    assert alice_folded.fact in await facts(stack, "coordinator", alice_folded.principal)
    async with stack.memory_client("coordinator") as mem:
        r = await mem.recall(
            "session", "Lisbon", session_id=alice_folded.session, principal="f-bob"
        )
    assert r.short_term.window == [] and r.medium_term.version is None
    assert r.long_term.facts == []


async def test_a_second_principal_cannot_join_a_known_session(
    stack: LocalStack, http: aiohttp.ClientSession
) -> None:
    await ask(http, stack, "coordinator", "j-alice", "j-1", "My PIN is 4711.")
    await ask(http, stack, "coordinator", "j-bob", "j-1", "Hello?")
    await ask(http, stack, "coordinator", "j-bob", "j-1", "What was said here?")

    req = await last_model_request(stack, "What was said here?")
    assert "4711" not in str(req["messages"])


async def test_forget_erases_a_principals_rows_and_nothing_else(
    stack: LocalStack, http: aiohttp.ClientSession, alice_folded: Folded
) -> None:
    carol = await fold_session(http, stack, "g-carol", "g-carol-1", "I live in Reykjavik.")
    await ask(http, stack, "coordinator", carol.principal, carol.session, "Ask the researcher.")
    db = stack.memory_db
    assert any(t["principal"] == carol.principal for t in db.turns())
    assert "Reykjavik" in db.everything_text()

    erased = {}
    for agent in ("coordinator", "researcher"):
        async with stack.memory_client(agent) as mem:
            f = await mem.forget("agent", principal=carol.principal, failure_mode="strict")
        assert not f.degraded
        erased[agent] = f.forgotten
    assert erased["coordinator"].long_term >= 1 and erased["coordinator"].medium_term >= 1
    assert erased["coordinator"].short_term + erased["researcher"].short_term >= 8

    assert await facts(stack, "coordinator", carol.principal) == []
    assert await facts(stack, "researcher", carol.principal) == []
    assert not [t for t in db.turns() if t["principal"] == carol.principal]
    assert not [p for p in db.vector_payloads() if p.get("user_id") == carol.principal]
    assert "Reykjavik" not in db.everything_text()
    # Scoped: alice's memory is still there.
    assert alice_folded.fact in await facts(stack, "coordinator", alice_folded.principal)
    reply = await ask(http, stack, "coordinator", carol.principal, "g-carol-2", "Where do I live?")
    assert reply.text == "From long-term memory:\nNo matching memories."


# --- per-role model bindings and GET /tools ---------------------------------------------


async def test_each_model_role_reaches_its_own_endpoint(
    stack: LocalStack, alice_folded: Folded
) -> None:
    """The store's embedding role is bound to the second ModelAPI, summarisation to the
    sample's: every embedding reached the second devmodel process, every digest and
    extraction the first, and neither got the other's calls."""
    api = stack.samples.model_api.name
    assert stack.store.spec.models.embedding.model_api == f"{api}-embeddings"
    embedder, summarizer = stack.embedding_devmodel, stack.devmodel
    assert embedder.url != summarizer.url
    # A recall's query is embedded at the embedding endpoint.
    query = "which city does the role test ask about"
    async with stack.memory_client("coordinator") as mem:
        await mem.recall("agent", query, principal=alice_folded.principal, include=["long_term"])
    embedded = [t for r in await embedder.aembedding_requests() for t in r["input"]]
    assert query in embedded
    assert await embedder.arequests() == []
    kinds = {r["kind"] for r in await summarizer.arequests()}
    assert {"digest", "extraction"} <= kinds
    assert await summarizer.aembedding_requests() == []


async def test_get_tools_lists_the_coordinators_tools(
    stack: LocalStack, http: aiohttp.ClientSession
) -> None:
    async with http.get(stack.agent_url("coordinator") + "/tools") as resp:
        assert resp.status == 200
        body = await resp.json()
    sources = {t["name"]: t["source"] for t in body["tools"]}
    assert sources == {
        "delegate_to_researcher": "delegation",
        "search_memory": "memory",
        "save_memory": "memory",
    }
    assert body["unavailable"] == []
    async with http.get(stack.agent_url("researcher") + "/tools") as resp:
        researcher = await resp.json()
    assert {t["source"] for t in researcher["tools"]} == {"mcp:text-tools"}
    assert "word_count" in {t["name"] for t in researcher["tools"]}
