"""status.modelCapabilities: read from the backend once a ModelAPI's Deployment is
available, against an aiohttp app on loopback answering as Ollama's /api/show and
LiteLLM's /model/info do (the model boundary); the reader and the reconciler are real."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from kaos_core.crds import reasons
from kaos_core.crds.modelapi import ModelAPIMode
from kaos_operator.capabilities import CapabilityError, read_capabilities
from kaos_operator.reconcilers import build_reconcilers

from tests.support.loopback import served
from tests.support.operator_context import FakeContext, raw
from tests.support.procs import free_port

# As Ollama 0.17 answers /api/show (trimmed to what is read).
OLLAMA_MODELS = {
    "smollm2:135m": ["completion"],
    "qwen3:0.6b": ["completion", "tools", "thinking"],
    "nomic-embed-text:latest": ["embedding"],
}
# As LiteLLM answers /model/info: supports_function_calling is a bool for the models it
# knows and absent (or null) for the others.
LITELLM_INFO = [
    {
        "model_name": "gpt-4o-mini",
        "model_info": {"mode": "chat", "supports_function_calling": True},
    },
    {"model_name": "plain", "model_info": {"mode": "chat", "supports_function_calling": False}},
    {"model_name": "mystery", "model_info": {"mode": None, "supports_function_calling": None}},
    {"model_name": "bare", "litellm_params": {"model": "openai/bare"}},
    {
        "model_name": "embed",
        "model_info": {"mode": "embedding", "supports_function_calling": False},
    },
]

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@dataclass
class Backend:
    """What the loopback backend was asked, and how it answers next."""

    port: int = 0
    asked: list[tuple[str, Any]] = field(default_factory=list)
    failing: bool = False

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
async def backend() -> AsyncIterator[Backend]:
    state = Backend()

    async def show(request: web.Request) -> web.Response:
        body = await request.json()
        state.asked.append(("/api/show", body))
        if state.failing:
            return web.json_response({"error": "busy"}, status=500)
        caps = OLLAMA_MODELS.get(body.get("model"))
        if caps is None:
            return web.json_response(
                {"error": f"model '{body.get('model')}' not found"}, status=404
            )
        return web.json_response({"details": {"family": "llama"}, "capabilities": caps})

    async def model_info(request: web.Request) -> web.Response:
        state.asked.append(("/model/info", None))
        return web.json_response({"data": LITELLM_INFO})

    app = web.Application()
    app.router.add_post("/api/show", show)
    app.router.add_get("/model/info", model_info)
    async with served(app) as port:
        state.port = port
        yield state


async def test_ollama_reports_each_served_models_capabilities(backend: Backend) -> None:
    caps = await read_capabilities(backend.url(), "Hosted", ["smollm2:135m", "qwen3:0.6b"])
    assert caps == {
        "smollm2:135m": ["completion"],
        "qwen3:0.6b": ["completion", "tools", "thinking"],
    }
    assert backend.asked == [
        ("/api/show", {"model": "smollm2:135m"}),
        ("/api/show", {"model": "qwen3:0.6b"}),
    ]


async def test_ollama_without_the_model_is_an_error(backend: Backend) -> None:
    with pytest.raises(CapabilityError, match="/api/show: HTTP 404"):
        await read_capabilities(backend.url(), "Hosted", ["absent:1b"])


async def test_litellm_reports_tools_where_it_knows_the_model(backend: Backend) -> None:
    caps = await read_capabilities(backend.url() + "/", "Proxy", ["ignored"])
    assert caps == {
        "gpt-4o-mini": ["completion", "tools"],
        "plain": ["completion"],
        "embed": ["embedding"],
    }
    # Unknown to LiteLLM (no bool): left out, so a reader takes it as unknown.
    assert "mystery" not in caps and "bare" not in caps
    assert backend.asked == [("/model/info", None)]


def hosted(model: str = "smollm2:135m") -> dict[str, Any]:
    return {"mode": "Hosted", "serverConfig": {"model": model}}


def capability_condition(status: dict[str, Any]) -> tuple[str, str, str]:
    cond = next(c for c in status["conditions"] if c["type"] == reasons.CAPABILITIES_READ)
    return cond["status"], cond["reason"], cond["message"]


async def test_the_reconciler_reads_once_per_generation_and_keeps_the_last_known(
    backend: Backend,
) -> None:
    asked: list[tuple[str, ModelAPIMode, list[str]]] = []

    async def loopback(url: str, mode: ModelAPIMode, models: Sequence[str]) -> Any:
        # The Service's name resolves only in the cluster: the same read, to the process
        # serving it here.
        asked.append((url, mode, list(models)))
        return await read_capabilities(backend.url(), mode, models)

    now = [T0]
    ctx = FakeContext()
    ctx.add(raw("ModelAPI", "ol", hosted()))
    rec = build_reconcilers(ctx, capability_reader=loopback, clock=lambda: now[0])["ModelAPI"]
    await rec.reconcile("ns", "ol")
    status = ctx.status_of("ModelAPI", "ns", "ol")
    assert "modelCapabilities" not in status and asked == []  # not up yet
    assert capability_condition(status) == (
        "Unknown",
        reasons.WAITING_FOR_DEPLOYMENT,
        "read from the backend once the Deployment is available",
    )

    ctx.deployment_available("ns", "ol")
    await rec.reconcile("ns", "ol")
    # The read runs beside the reconcile: under way, then its end wakes the ModelAPI.
    assert capability_condition(ctx.status_of("ModelAPI", "ns", "ol")) == (
        "Unknown",
        reasons.CAPABILITIES_READING,
        "reading capabilities at http://ol.ns.svc:11434",
    )
    assert rec.take_recheck("ns", "ol") is None  # the wake, not a timer, queues it again
    await ctx.woken("ModelAPI", "ns", "ol")
    await rec.reconcile("ns", "ol")
    status = ctx.status_of("ModelAPI", "ns", "ol")
    assert status["modelCapabilities"] == {"smollm2:135m": ["completion"]}
    assert capability_condition(status) == (
        "True",
        reasons.CAPABILITIES_REPORTED,
        "capabilities of 1 of 1 served models read from the backend",
    )
    assert asked == [("http://ol.ns.svc:11434", "Hosted", ["smollm2:135m"])]
    await rec.reconcile("ns", "ol")
    assert len(asked) == 1  # same generation: not read again

    # A new generation whose read fails: the condition says so, the last value stays.
    backend.failing = True
    updated = raw("ModelAPI", "ol", hosted())
    updated["metadata"]["generation"] = 2
    ctx.add({**updated, "status": ctx.status_of("ModelAPI", "ns", "ol")})
    await rec.reconcile("ns", "ol")
    await ctx.woken("ModelAPI", "ns", "ol")
    await rec.reconcile("ns", "ol")
    status = ctx.status_of("ModelAPI", "ns", "ol")
    assert len(asked) == 2
    assert capability_condition(status) == (
        "False",
        reasons.CAPABILITY_READ_FAILED,
        "reading capabilities at http://ol.ns.svc:11434 failed (CapabilityError); retrying",
    )
    assert status["modelCapabilities"] == {"smollm2:135m": ["completion"]}
    assert rec.take_recheck("ns", "ol") == 2.0
    # Queued again before that (another event): the failure stands, nothing is read.
    backend.failing = False
    await rec.reconcile("ns", "ol")
    assert len(asked) == 2
    assert rec.take_recheck("ns", "ol") == 2.0
    # Once the delay has passed: read again, the backend answers, no recheck is asked for.
    now[0] = T0 + timedelta(seconds=2)
    await rec.reconcile("ns", "ol")
    # While the retry runs the failure stands: the condition does not flap to Unknown.
    assert capability_condition(ctx.status_of("ModelAPI", "ns", "ol"))[:2] == (
        "False",
        reasons.CAPABILITY_READ_FAILED,
    )
    await ctx.woken("ModelAPI", "ns", "ol")
    await rec.reconcile("ns", "ol")
    assert len(asked) == 3
    assert rec.take_recheck("ns", "ol") is None
    assert capability_condition(ctx.status_of("ModelAPI", "ns", "ol"))[0] == "True"
    # The workload itself is fine: the read does not decide readiness.
    assert status["phase"] == reasons.PHASE_READY


async def test_a_proxy_that_does_not_answer_is_reported() -> None:
    closed = free_port()

    async def nowhere(url: str, mode: ModelAPIMode, models: Sequence[str]) -> Any:
        return await read_capabilities(f"http://127.0.0.1:{closed}", mode, models)

    ctx = FakeContext()
    ctx.add(raw("ModelAPI", "llm", {"mode": "Proxy", "proxyConfig": {"models": ["m"]}}))
    now = [T0]
    rec = build_reconcilers(ctx, capability_reader=nowhere, clock=lambda: now[0])["ModelAPI"]
    await rec.reconcile("ns", "llm")
    ctx.deployment_available("ns", "llm")
    await rec.reconcile("ns", "llm")
    await ctx.woken("ModelAPI", "ns", "llm")
    await rec.reconcile("ns", "llm")
    status = ctx.status_of("ModelAPI", "ns", "llm")
    assert capability_condition(status) == (
        "False",
        reasons.CAPABILITY_READ_FAILED,
        "reading capabilities at http://llm.ns.svc:4000 failed (ClientConnectorError); retrying",
    )
    assert "modelCapabilities" not in status
    assert rec.take_recheck("ns", "llm") == 2.0
    now[0] = T0 + timedelta(seconds=2)
    await rec.reconcile("ns", "llm")
    await ctx.woken("ModelAPI", "ns", "llm")
    await rec.reconcile("ns", "llm")
    assert rec.take_recheck("ns", "llm") == 4.0
