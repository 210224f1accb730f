"""The agent's aiohttp application: chat completions, A2A, health and metrics.

``create_app(settings, deps=AgentDeps(...))`` builds the graph; every part ``deps``
leaves out is built from the settings, and tests hand in their own (a model, a memory
backend, toolsets, the peers' HTTP session, the autonomous loop's sleep). Everything
with a lifetime (the verifier of delegating agents, the peer HTTP session, the memory
backend, the reasoning loop, the A2A task store and its runs, the autonomous loop) is
created and closed by ``cleanup_ctx`` generators, in that order, so shutdown closes only
what started; a part handed in through ``deps`` belongs to the caller and is not closed
here.

Shutdown drains first: readiness answers 503, new chat requests and A2A ``SendMessage``
are refused with 503, running tasks get ``AGENT_SHUTDOWN_GRACE_SECONDS`` to finish, and the
ones still running then are failed with a reason (``kaos_agent.a2a.runs``). Served by
``run_service``, SIGTERM starts the drain while the agent still listens (so the 503s are
seen, and the Service stops sending it requests: ``kaos_agent.shutdown``), then the server
shuts down; an app stopped otherwise drains in ``on_shutdown``, before anything closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web
from kaos_core.http import READINESS_KEY, REGISTRY_KEY, create_base_app
from kaos_core.memory.client import MemoryServiceClient
from kaos_core.telemetry.genai_metrics import GenAiMetrics
from kaos_core.tracing import client_session
from pydantic_ai.models import Model
from pydantic_ai.toolsets import AbstractToolset

from kaos_agent.a2a.card import CardBuilder
from kaos_agent.a2a.runs import TaskRuns
from kaos_agent.a2a.server import A2AServer
from kaos_agent.a2a.stores import build_task_store
from kaos_agent.a2a.tasks import TaskStore
from kaos_agent.access import invoke_access
from kaos_agent.approvals.desk import approval_desk
from kaos_agent.approvals.gate import gate_toolsets
from kaos_agent.audit_trail.http import AUDIT_KEY as AUDIT_KEY  # the AuditLog, for others
from kaos_agent.audit_trail.http import AUDITOR_KEY, setup_audit
from kaos_agent.auth import EdgeAuth
from kaos_agent.autonomous import Sleep, autonomous_loop
from kaos_agent.chat import chat_completions
from kaos_agent.context import RunDeps
from kaos_agent.delegation import PeerClient
from kaos_agent.load import LOAD_PATH, load_handler
from kaos_agent.loop import agent_toolsets, build_agent, openai_model, request_settings
from kaos_agent.memory.base import Memory, NoMemory
from kaos_agent.memory.local import LocalMemory
from kaos_agent.memory.remote import RemoteMemory
from kaos_agent.metrics import AgentMetrics
from kaos_agent.one_request import OneRequest
from kaos_agent.runner import AgentRuntime
from kaos_agent.settings import AgentMemorySettings, AgentSettings
from kaos_agent.shutdown import drain_on_sigterm
from kaos_agent.telemetry import MeteredModel, instrumentation
from kaos_agent.tool_listing import list_tools
from kaos_agent.tool_support import ToolRefusalFallback, ToolSupport
from kaos_agent.toolsets import GuardedToolset, mcp_http_client, mcp_toolset, mcp_toolsets
from kaos_agent.triggers import setup_triggers
from kaos_agent.usage import ACCOUNTING_KEY, setup_usage

if TYPE_CHECKING:
    import httpx2

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class AgentDeps:
    """Parts of the graph given from outside instead of built from the settings."""

    # The reasoning loop's model; default the OpenAI-compatible ModelAPI of the settings.
    model: Model | None = None
    # The memory backend; default the one ``settings.memory`` names.
    memory: Memory | None = None
    # Tool servers' toolsets (each is guarded); default one MCP toolset per MCP_SERVERS entry.
    toolsets: Sequence[AbstractToolset[RunDeps]] | None = None
    # The HTTP session delegations go through; default one the app opens and closes.
    peer_http: aiohttp.ClientSession | None = None
    # How the autonomous loop waits between iterations.
    sleep: Sleep = asyncio.sleep


SETTINGS_KEY = web.AppKey("agent_settings", AgentSettings)
DEPS_KEY = web.AppKey("agent_deps", AgentDeps)
METRICS_KEY = web.AppKey("agent_metrics", AgentMetrics)
GENAI_METRICS_KEY = web.AppKey("agent_genai_metrics", GenAiMetrics)
PEERS_KEY = web.AppKey("agent_peer_client", PeerClient)
MEMORY_KEY = web.AppKey("agent_memory", Memory)
RUNTIME_KEY = web.AppKey("agent_runtime", AgentRuntime)
A2A_KEY = web.AppKey("agent_a2a", A2AServer)
TASK_STORE_KEY = web.AppKey("agent_task_store", TaskStore)
TASK_RUNS_KEY = web.AppKey("agent_task_runs", TaskRuns)
CARD_KEY = web.AppKey("agent_card", CardBuilder)
# The loop's toolsets, as the model is offered them, for ``GET /tools``.
TOOLSETS_KEY: web.AppKey[Sequence[AbstractToolset[RunDeps]]] = web.AppKey("agent_toolsets")
# Verification of delegating agents; ``None`` with AGENT_AUTH_MODE=off.
AUTH_KEY: web.AppKey[EdgeAuth | None] = web.AppKey("agent_auth")


def build_memory(
    settings: AgentMemorySettings, agent_identity: str | None, metrics: AgentMetrics
) -> Memory:
    if settings.type == "remote":
        assert settings.endpoint is not None  # checked by the settings
        client = MemoryServiceClient(
            settings.endpoint,
            agent_identity=agent_identity,
            timeout=settings.timeout_seconds,
            failure_mode=settings.failure_mode,
            token_file=settings.token_file,
        )
        return RemoteMemory(
            client,
            max_read_scope=settings.max_read_scope,
            failure_mode=settings.failure_mode,
            write_after_answer=settings.write_after_answer,
            top_k=settings.top_k,
            require_principal=settings.require_principal,
            metrics=metrics,
        )
    if settings.type == "local":
        return LocalMemory(settings.token_budget)
    return NoMemory()


def create_app(settings: AgentSettings, *, deps: AgentDeps | None = None) -> web.Application:
    app = create_base_app(
        "kaos-agent",
        limits=settings.limits,
        telemetry=settings.telemetry,
        max_body_bytes=MAX_BODY_BYTES,
    )
    app[SETTINGS_KEY] = settings
    app[DEPS_KEY] = deps or AgentDeps()
    app[METRICS_KEY] = AgentMetrics.create(app[REGISTRY_KEY])
    app[GENAI_METRICS_KEY] = GenAiMetrics.create(app[REGISTRY_KEY])
    # The audit trail beside the task store and GET /v1/audit: opened before the runs
    # start, closed after they ended.
    setup_audit(app, settings, lambda: app[AUTH_KEY])
    app.cleanup_ctx.append(_auth_ctx)
    app.cleanup_ctx.append(_peers_ctx)
    app.cleanup_ctx.append(_memory_ctx)
    # The usage ledger and the runs' accounting (before the runtime, which is given it).
    setup_usage(app, settings, lambda: app[AUTH_KEY])
    app.cleanup_ctx.append(_runtime_ctx)
    app.cleanup_ctx.append(_tasks_ctx)
    app.cleanup_ctx.append(_autonomous_ctx)
    # POST /v1/triggers/{name} and its delivery log (nothing opened without triggers).
    setup_triggers(app, settings, lambda: app[A2A_KEY])
    app.on_shutdown.append(_drain)

    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/tools", _tools)
    # The autoscaler's signal (kaos_agent.load); the task store starts after the routes.
    app.router.add_get(LOAD_PATH, load_handler(lambda: app.get(TASK_STORE_KEY), app[METRICS_KEY]))
    if settings.server.a2a_enabled:
        app.router.add_get("/.well-known/agent-card.json", _card)
        app.router.add_get("/.well-known/agent.json", _card)
        app.router.add_post("/", _a2a)
    return app


async def _auth_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS_KEY]
    auth = EdgeAuth.from_settings(
        settings.auth, settings.user_auth, settings.agent.identity, invoke_access(settings)
    )
    app[AUTH_KEY] = auth
    try:
        yield
    finally:
        if auth is not None:
            await auth.close()


async def _peers_ctx(app: web.Application) -> AsyncIterator[None]:
    given = app[DEPS_KEY].peer_http
    http = given or client_session()
    try:
        delegation = app[SETTINGS_KEY].delegation
        app[PEERS_KEY] = PeerClient(
            http, timeout=delegation.timeout_seconds, token_file=delegation.token_file
        )
        yield
    finally:
        if given is None:
            await http.close()


async def _memory_ctx(app: web.Application) -> AsyncIterator[None]:
    given = app[DEPS_KEY].memory
    settings = app[SETTINGS_KEY]
    memory = given or build_memory(settings.memory, settings.agent.identity, app[METRICS_KEY])
    app[MEMORY_KEY] = memory
    try:
        yield
    finally:
        if given is None:
            await memory.close()


async def _runtime_ctx(app: web.Application) -> AsyncIterator[None]:
    settings, deps, metrics = app[SETTINGS_KEY], app[DEPS_KEY], app[METRICS_KEY]
    memory = app[MEMORY_KEY]
    support = ToolSupport(metrics, enabled=settings.model.tools != "off")
    delegation, memory_settings = settings.delegation, settings.memory
    tools: list[GuardedToolset] = []
    mcp_http: httpx2.AsyncClient | None = None
    if not support.enabled:
        # A model that cannot call tools gets none: no MCP sessions, no peers, no memory tools.
        log.info("tools are off (MODEL_TOOLS=off): the model is offered none")
        delegation = delegation.model_copy(update={"peers": ()})
        memory_settings = memory_settings.model_copy(update={"tools": "none"})
    elif deps.toolsets is None:
        if settings.tools.servers:
            mcp_http = mcp_http_client(settings.tools)
            tools = mcp_toolsets(settings.tools, metrics, mcp_http, audit=app[AUDITOR_KEY])
    else:
        tools = [
            GuardedToolset(t, label_text="tools", metrics=metrics, audit=app[AUDITOR_KEY])
            for t in deps.toolsets
        ]
    toolsets = agent_toolsets(
        tools=tools,
        delegation=delegation,
        peer_client=app[PEERS_KEY],
        memory=memory_settings,
        remote_memory=memory if isinstance(memory, RemoteMemory) else None,
        metrics=metrics,
        audit=app[AUDITOR_KEY],
    )
    app[TOOLSETS_KEY] = toolsets
    given_model, model_http = deps.model, None
    if given_model is None:
        # The model's own session: its pool is not shared with peers' or memory's requests.
        model_http = client_session()
        given_model = openai_model(settings.model, model_http)
    model = MeteredModel(given_model, app[GENAI_METRICS_KEY], settings.agent.name)
    # Outside the metered model: a refused request is measured too.
    loop_model = ToolRefusalFallback(model, support)
    instrument = instrumentation()
    agent = build_agent(
        name=settings.agent.name,
        instructions=settings.agent.instructions,
        model=loop_model,
        model_settings=settings.model,
        delegation=delegation,
        # Approval gates wrap the toolsets their rules name (kaos_agent.approvals).
        toolsets=gate_toolsets(toolsets, settings.approvals.policy, delegation.peers),
        instrument=instrument,
    )
    # No tools and no tracing: a run is one model request (kaos_agent.one_request), on the
    # metered model: a request offering no tools has no tool refusal to fall back from.
    one_request = (
        OneRequest(model, settings.agent.instructions, request_settings(settings.model))
        if not toolsets and instrument is None
        else None
    )
    runtime = AgentRuntime(
        agent,
        memory,
        metrics,
        max_steps=settings.model.max_steps,
        budget=settings.budget,
        one_request=one_request,
        accounting=app[ACCOUNTING_KEY],
        gated=settings.approvals.policy is not None,
    )
    try:
        app[RUNTIME_KEY] = runtime
        listed = [
            (t.label_text.removeprefix("mcp:"), mcp)
            for t in tools
            if (mcp := mcp_toolset(t.wrapped)) is not None
        ]
        app[CARD_KEY] = CardBuilder(settings, listed)
        yield
    finally:
        if model_http is not None:
            await model_http.close()
        if mcp_http is not None:
            await mcp_http.aclose()


async def _tasks_ctx(app: web.Application) -> AsyncIterator[None]:
    settings, metrics = app[SETTINGS_KEY].task_store, app[METRICS_KEY]
    store = build_task_store(settings)
    await store.start()
    runs = TaskRuns(
        store,
        runner=settings.runner,
        lease_seconds=settings.lease_seconds,
        retention_seconds=settings.retention_seconds,
        working=metrics.tasks_working,
        in_flight=metrics.runs_in_flight.labels("a2a"),
    )
    log.info("task store ready", extra={"type": settings.type, "runner": runs.runner})
    try:
        await runs.start()
        app[TASK_STORE_KEY], app[TASK_RUNS_KEY] = store, runs
        # Approval gates' paused runs: decided, timed out, resumed on any replica.
        desk = approval_desk(
            app[SETTINGS_KEY], store, runs.runner, app[AUTH_KEY], app.get(AUDIT_KEY)
        )
        app[A2A_KEY] = A2AServer(app[RUNTIME_KEY], store, runs, auth=app[AUTH_KEY], approvals=desk)

        async def serving() -> None:
            runs.check_open()

        app[READINESS_KEY].add("serving", serving)
        with drain_on_sigterm(runs, app[SETTINGS_KEY].task_store.shutdown_grace_seconds):
            yield
    finally:
        await runs.close()
        await store.close()


async def _drain(app: web.Application) -> None:
    """The first step of shutdown: refuse new runs, let running ones finish in time."""
    runs = app.get(TASK_RUNS_KEY)
    if runs is not None:
        await runs.drain(app[SETTINGS_KEY].task_store.shutdown_grace_seconds)


async def _autonomous_ctx(app: web.Application) -> AsyncIterator[None]:
    autonomous = app[SETTINGS_KEY].autonomous
    if autonomous is None:
        yield
        return
    store, runner = app[TASK_STORE_KEY], app[TASK_RUNS_KEY].runner
    lease = f"autonomous:{app[SETTINGS_KEY].agent.name}"
    # Held past the next iteration's start by its holder (which takes it again then), so
    # one replica runs the iterations while it lives and two never overlap; another takes
    # over once the holder stopped renewing it.
    hold = autonomous.interval_seconds + autonomous.timeout_seconds

    async def claim() -> bool:
        return await store.try_lease(lease, runner, hold)

    task = asyncio.create_task(
        autonomous_loop(
            autonomous,
            app[RUNTIME_KEY],
            sleep=app[DEPS_KEY].sleep,
            claim=claim if store.shared else None,
            in_flight=app[METRICS_KEY].runs_in_flight.labels("autonomous"),
        )
    )
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _chat(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS_KEY]
    runtime, auth = request.app[RUNTIME_KEY], request.app[AUTH_KEY]
    request.app[TASK_RUNS_KEY].check_open()  # 503 once the replica is stopping
    in_flight = request.app[METRICS_KEY].runs_in_flight.labels("chat")
    in_flight.inc()
    try:
        return await chat_completions(request, runtime, settings.agent.name, auth)
    finally:
        in_flight.dec()


async def _models(request: web.Request) -> web.Response:
    name = request.app[SETTINGS_KEY].agent.name
    return web.json_response(
        {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "kaos"}]}
    )


async def _tools(request: web.Request) -> web.Response:
    # The same callers as a chat: with verified identity on, the same credentials.
    auth = request.app[AUTH_KEY]
    if auth is not None:
        await auth.check(request.headers)
    listing = await list_tools(request.app[TOOLSETS_KEY])
    return web.json_response(listing.model_dump(mode="json"))


async def _card(request: web.Request) -> web.Response:
    return web.json_response(await request.app[CARD_KEY].card())


async def _a2a(request: web.Request) -> web.Response:
    return await request.app[A2A_KEY].handle(request)
