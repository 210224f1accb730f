"""The agent's aiohttp application: chat completions, A2A, health and metrics.

Everything with a lifetime (the peer HTTP session, the memory client, the A2A task
store, the autonomous loop) is created and closed by ``cleanup_ctx`` generators, in
that order, so shutdown closes only what started.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import aiohttp
from aiohttp import web
from kaos_core.http import REGISTRY_KEY, create_base_app
from kaos_core.memory.client import MemoryServiceClient
from pydantic_ai.mcp import MCPToolset

from kaos_agent.a2a.card import CardBuilder
from kaos_agent.a2a.server import A2AServer
from kaos_agent.a2a.tasks import TaskStore
from kaos_agent.autonomous import autonomous_loop
from kaos_agent.chat import chat_completions
from kaos_agent.context import RunDeps
from kaos_agent.delegation import PeerClient
from kaos_agent.loop import build_agent
from kaos_agent.memory.base import Memory, NoMemory
from kaos_agent.memory.local import LocalMemory
from kaos_agent.memory.remote import RemoteMemory
from kaos_agent.metrics import AgentMetrics
from kaos_agent.runner import AgentRuntime
from kaos_agent.settings import AgentSettings
from kaos_agent.toolsets import mcp_toolsets

SETTINGS_KEY = web.AppKey("agent_settings", AgentSettings)
METRICS_KEY = web.AppKey("agent_metrics", AgentMetrics)
PEERS_KEY = web.AppKey("agent_peer_client", PeerClient)
MEMORY_KEY = web.AppKey("agent_memory", object)
RUNTIME_KEY = web.AppKey("agent_runtime", AgentRuntime)
A2A_KEY = web.AppKey("agent_a2a", A2AServer)
CARD_KEY = web.AppKey("agent_card", CardBuilder)

MAX_BODY_BYTES = 8 * 1024 * 1024


def build_memory(settings: AgentSettings, metrics: AgentMetrics) -> Memory:
    if settings.memory_type == "remote":
        assert settings.memory_endpoint is not None  # checked by the settings
        client = MemoryServiceClient(
            settings.memory_endpoint,
            agent_identity=settings.identity,
            timeout=settings.memory_timeout_seconds,
            failure_mode=settings.memory_failure_mode,
        )
        return RemoteMemory(
            client,
            max_read_scope=settings.memory_max_read_scope,
            failure_mode=settings.memory_failure_mode,
            top_k=settings.memory_top_k,
            require_principal=settings.memory_require_principal,
            metrics=metrics,
        )
    if settings.memory_type == "local":
        return LocalMemory(settings.memory_token_budget)
    return NoMemory()


def create_app(settings: AgentSettings) -> web.Application:
    app = create_base_app("kaos-agent", max_body_bytes=MAX_BODY_BYTES)
    metrics = AgentMetrics.create(app[REGISTRY_KEY])
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = metrics
    app.cleanup_ctx.append(_peers_ctx)
    app.cleanup_ctx.append(_runtime_ctx)
    app.cleanup_ctx.append(_autonomous_ctx)

    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_get("/v1/models", _models)
    if settings.a2a_enabled:
        app.router.add_get("/.well-known/agent-card.json", _card)
        app.router.add_get("/.well-known/agent.json", _card)
        app.router.add_post("/", _a2a)
    return app


async def _peers_ctx(app: web.Application) -> AsyncIterator[None]:
    http = aiohttp.ClientSession()
    app[PEERS_KEY] = PeerClient(http, timeout=app[SETTINGS_KEY].delegation_timeout_seconds)
    yield
    await http.close()


async def _runtime_ctx(app: web.Application) -> AsyncIterator[None]:
    settings, metrics = app[SETTINGS_KEY], app[METRICS_KEY]
    memory = build_memory(settings, metrics)
    mcp = mcp_toolsets(settings.mcp_servers, metrics, timeout=settings.model_timeout_seconds)
    agent = build_agent(
        settings,
        metrics,
        peer_client=lambda: app[PEERS_KEY],
        remote_memory=memory if isinstance(memory, RemoteMemory) else None,
        mcp=mcp,
    )
    runtime = AgentRuntime(agent, memory, metrics, max_steps=settings.max_steps)
    tasks = TaskStore()
    app[MEMORY_KEY] = memory
    app[RUNTIME_KEY] = runtime
    app[A2A_KEY] = A2AServer(runtime, tasks)
    listed: list[tuple[str, MCPToolset[RunDeps]]] = [
        (t.label_text.removeprefix("mcp:"), t.wrapped)
        for t in mcp
        if isinstance(t.wrapped, MCPToolset)
    ]
    app[CARD_KEY] = CardBuilder(settings, listed)
    yield
    await tasks.close()
    await memory.close()


async def _autonomous_ctx(app: web.Application) -> AsyncIterator[None]:
    settings = app[SETTINGS_KEY]
    if not settings.autonomous:
        yield
        return
    task = asyncio.create_task(autonomous_loop(settings, app[RUNTIME_KEY]))
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _chat(request: web.Request) -> web.StreamResponse:
    settings = request.app[SETTINGS_KEY]
    return await chat_completions(request, request.app[RUNTIME_KEY], settings.name)


async def _models(request: web.Request) -> web.Response:
    name = request.app[SETTINGS_KEY].name
    return web.json_response(
        {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "kaos"}]}
    )


async def _card(request: web.Request) -> web.Response:
    return web.json_response(await request.app[CARD_KEY].card())


async def _a2a(request: web.Request) -> web.Response:
    return await request.app[A2A_KEY].handle(request)
