"""The development model server: OpenAI-compatible routes plus ``/control/`` for tests.

``/v1/models``, ``/v1/chat/completions`` (plain and streamed) and ``/v1/embeddings`` answer
as OpenAI does, deterministically (``chat``, ``embeddings``). ``/control/script``,
``/control/faults``, ``/control/reset``, ``/control/stats``, ``/control/requests`` and
``/control/embeddings`` let a test or demo steer the model and see what it was asked (each
recorded request with ``received_at``, the wall-clock time it arrived, before any injected
delay: so a test can tell which calls started after a point in time; an answered one with
the usage it reported and the sampling parameters it was sent). It counts the tokens it
served, as a model provider bills them: ``input_tokens`` and ``output_tokens`` of
``/control/stats`` (since the last reset) and ``kaos_devmodel_tokens_total{kind}`` on
``/metrics`` (since start), the usage its chat answers reported, streamed or not. A model named in
``KAOS_DEVMODEL_NO_TOOLS_MODELS`` refuses any request offering tools with HTTP 400
``<model> does not support tools``, as Ollama does for a model without the tools
capability. All state lives in one ``DevModelState`` per application.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from kaos_core.errors import BadRequest
from kaos_core.http import REGISTRY_KEY, create_base_app
from kaos_core.http.body import parse_model, read_json_object, read_model
from kaos_core.http.limits import HttpLimits
from kaos_core.telemetry.settings import TelemetrySettings
from prometheus_client import Counter as MetricCounter

from kaos_devmodel.chat import Answer, Script, answer
from kaos_devmodel.completions import (
    SSE_DONE,
    Completion,
    IssuedCall,
    completion_body,
    sse_event,
    stream_chunks,
    usage_of,
)
from kaos_devmodel.embeddings import embed, encode_base64
from kaos_devmodel.faults import ClientGone, FaultConfig, FaultInjector, InjectedFault
from kaos_devmodel.prompts import recognise
from kaos_devmodel.protocol import (
    ChatRequest,
    EmbeddingRequest,
    ToolsNotSupported,
    Usage,
    word_count,
)
from kaos_devmodel.script import Rule, ScriptBody
from kaos_devmodel.settings import DevModelSettings

SERVICE = "kaos-devmodel"
RECENT_REQUESTS = 1000
# Embedding requests are many per memory operation: a longer log of their inputs.
RECENT_EMBEDDINGS = 1000
# Every counter ``GET /control/stats`` reports, zero until it happens.
STAT_NAMES = (
    "chat",
    "extraction",
    "procedural",
    "digest",
    "scripted",
    "directive",
    "tool_result",
    "echo",
    "embeddings",
    "embedded_texts",
    "models",
    "errors_injected",
    "hangs",
    "clients_gone",
    "tools_refused",
    # The tokens of the chat answers served (their reported usage): prompt and completion.
    "input_tokens",
    "output_tokens",
)


@dataclass
class DevModelState:
    settings: DevModelSettings
    faults: FaultInjector
    answers_metric: MetricCounter
    # ``kaos_devmodel_tokens_total{kind}``: input and output tokens served since start.
    tokens_metric: MetricCounter
    # Read once at start, so a reset cannot fail on a script file edited since.
    initial_rules: list[Rule] = field(default_factory=list)
    script: Script = field(default_factory=Script)
    stats: Counter[str] = field(default_factory=Counter)
    recent: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=RECENT_REQUESTS))
    recent_embeddings: deque[dict[str, Any]] = field(
        default_factory=lambda: deque(maxlen=RECENT_EMBEDDINGS)
    )
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    # Bumped by every reset. A request counts in the generation it arrived in: one that was
    # delayed or held across a reset (a hung request the reset lets go) answers afterwards
    # but is not counted against the next test.
    generation: int = 0

    def reset(self) -> None:
        """Back to the state at start: script and faults from the settings, no history."""
        self.generation += 1
        self.script.replace(self.initial_rules)
        self.faults.replace(self.settings.initial_faults(), reseed=True)
        self.stats.clear()
        self.recent.clear()
        self.recent_embeddings.clear()
        self.ids = itertools.count(1)

    def tally(self, generation: int) -> Counter[str]:
        """The counters a request that arrived in ``generation`` adds to (none after a reset)."""
        return self.stats if generation == self.generation else Counter()

    def stats_body(self) -> dict[str, int]:
        return {name: self.stats[name] for name in STAT_NAMES}


STATE_KEY = web.AppKey("kaos_devmodel_state", DevModelState)


def create_app(
    settings: DevModelSettings,
    *,
    limits: HttpLimits | None = None,
    telemetry: TelemetrySettings | None = None,
) -> web.Application:
    """The development model's app; ``limits`` and ``telemetry`` default to the groups'
    defaults (tests), the program passes the ones it read."""
    app = create_base_app(
        SERVICE,
        limits=HttpLimits() if limits is None else limits,
        telemetry=TelemetrySettings() if telemetry is None else telemetry,
        max_body_bytes=settings.max_body_bytes,
    )
    metric = MetricCounter(
        "answers",
        "Chat answers, by the rule that gave them.",
        ["kind"],
        namespace="kaos_devmodel",
        registry=app[REGISTRY_KEY],
    )
    state = DevModelState(
        settings=settings,
        faults=FaultInjector(settings.initial_faults(), settings.seed),
        answers_metric=metric,
        tokens_metric=MetricCounter(
            "tokens",
            "Tokens of the chat answers served (their reported usage), by kind (input, output).",
            ["kind"],
            namespace="kaos_devmodel",
            registry=app[REGISTRY_KEY],
        ),
        initial_rules=settings.initial_rules(),
    )
    state.script.replace(state.initial_rules)
    app[STATE_KEY] = state
    # On shutdown hung requests are let go, so a graceful stop does not wait for them.
    app.on_shutdown.append(_on_shutdown)
    app.router.add_get("/v1/models", _list_models)
    app.router.add_get("/v1/models/{model}", _get_model)
    app.router.add_post("/v1/chat/completions", _chat_completions)
    app.router.add_post("/v1/embeddings", _embeddings)
    app.router.add_get("/control/script", _get_script)
    app.router.add_post("/control/script", _set_script)
    app.router.add_get("/control/faults", _get_faults)
    app.router.add_post("/control/faults", _set_faults)
    app.router.add_post("/control/reset", _reset)
    app.router.add_get("/control/stats", _stats)
    app.router.add_get("/control/requests", _requests)
    app.router.add_get("/control/embeddings", _embedding_requests)
    return app


async def _on_shutdown(app: web.Application) -> None:
    app[STATE_KEY].faults.release_all()


async def _apply_faults(
    request: web.Request, state: DevModelState, route: str, kind: str | None
) -> None:
    generation = state.generation
    if state.faults.config.hang and state.faults.config.applies_to(route, kind):
        state.stats["hangs"] += 1
    try:
        status = await state.faults.hold(request, route, kind)
    except ClientGone:
        state.tally(generation)["clients_gone"] += 1
        raise
    if status is not None:
        state.tally(generation)["errors_injected"] += 1
        raise InjectedFault(status)


def _model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": SERVICE}


async def _list_models(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    generation = state.generation
    await _apply_faults(request, state, "models", None)
    state.tally(generation)["models"] += 1
    data = [_model_object(name) for name in state.settings.model_names()]
    return web.json_response({"object": "list", "data": data})


async def _get_model(request: web.Request) -> web.Response:
    # Any model name is accepted in requests, so any name exists.
    return web.json_response(_model_object(request.match_info["model"]))


async def _chat_completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE_KEY]
    received_at = time.time()
    generation = state.generation
    req = await read_model(request, ChatRequest)
    if req.tools and req.model in _names(state.settings.no_tools_models):
        # Refused before anything else, as Ollama checks a model's capabilities first.
        if generation == state.generation:
            state.stats["tools_refused"] += 1
            state.recent.append(_record(req, "tools_refused", received_at, request))
        raise ToolsNotSupported(req.model)
    kind = recognise(req.messages)
    await _apply_faults(request, state, "chat", kind)
    ans, cut_off = state.faults.spoil(
        "chat",
        kind,
        answer(
            req.messages,
            req.offered_tools(),
            state.script,
            digest_words=state.settings.digest_max_words,
        ),
    )
    usage = usage_of(req.messages, ans)
    if generation == state.generation:
        _count_answer(state, req, ans, received_at, request, usage)
    completion = Completion(
        id=f"chatcmpl-devmodel-{next(state.ids)}",
        created=int(time.time()),
        model=req.model,
        answer=ans,
        calls=tuple(
            IssuedCall(id=f"call_{next(state.ids)}", name=c.name, arguments=c.arguments)
            for c in ans.tool_calls
        ),
        usage=usage,
        cut_off=cut_off,
    )
    if not req.stream:
        return web.json_response(completion_body(completion))
    include_usage = req.stream_options is not None and req.stream_options.include_usage
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for chunk in stream_chunks(completion, include_usage=include_usage):
        await response.write(sse_event(chunk))
    await response.write(SSE_DONE)
    await response.write_eof()
    return response


def _fingerprint(request: web.Request) -> str | None:
    """SHA-256 of the ``Authorization`` header: a test can check which credential a client
    sent without the server keeping or showing it."""
    value = request.headers.get("Authorization")
    return None if value is None else hashlib.sha256(value.encode()).hexdigest()


def _names(csv: str) -> set[str]:
    return {n.strip() for n in csv.split(",") if n.strip()}


def _record(
    req: ChatRequest, kind: str, received_at: float, request: web.Request
) -> dict[str, Any]:
    return {
        "kind": kind,
        "received_at": received_at,
        "authorization_sha256": _fingerprint(request),
        "model": req.model,
        "stream": req.stream,
        "stream_usage": req.stream_options is not None and req.stream_options.include_usage,
        "sampling": req.sampling(),
        "tools": sorted(req.offered_tools()),
        "messages": [{"role": m.role, "content": m.text()} for m in req.messages],
    }


def _count_answer(
    state: DevModelState,
    req: ChatRequest,
    ans: Answer,
    received_at: float,
    request: web.Request,
    usage: Usage,
) -> None:
    state.stats["chat"] += 1
    state.stats[ans.kind] += 1
    state.answers_metric.labels(ans.kind).inc()
    state.stats["input_tokens"] += usage.prompt_tokens
    state.stats["output_tokens"] += usage.completion_tokens
    state.tokens_metric.labels("input").inc(usage.prompt_tokens)
    state.tokens_metric.labels("output").inc(usage.completion_tokens)
    state.recent.append(
        {**_record(req, ans.kind, received_at, request), "usage": usage.model_dump()}
    )


async def _embeddings(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    received_at = time.time()
    generation = state.generation
    req = await read_model(request, EmbeddingRequest)
    texts = req.texts()
    if not texts:
        raise BadRequest("input: must not be empty", code="invalid_body")
    state.recent_embeddings.append(
        {
            "received_at": received_at,
            "authorization_sha256": _fingerprint(request),
            "model": req.model,
            "input": list(texts),
        }
    )
    await _apply_faults(request, state, "embeddings", None)
    dims = req.dimensions or state.settings.embedding_dims
    data = []
    for index, text in enumerate(texts):
        vec = embed(text, dims)
        value: list[float] | str = encode_base64(vec) if req.encoding_format == "base64" else vec
        data.append({"object": "embedding", "index": index, "embedding": value})
    tokens = sum(word_count(t) for t in texts)
    tally = state.tally(generation)
    tally["embeddings"] += 1
    tally["embedded_texts"] += len(texts)
    return web.json_response(
        {
            "object": "list",
            "data": data,
            "model": req.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


async def _get_script(request: web.Request) -> web.Response:
    script = request.app[STATE_KEY].script
    rules = [
        {**rule.model_dump(exclude_none=True), "fired": fired}
        for rule, fired in zip(script.rules, script.fired, strict=True)
    ]
    return web.json_response({"rules": rules})


async def _set_script(request: web.Request) -> web.Response:
    body = await read_model(request, ScriptBody)
    request.app[STATE_KEY].script.replace(body.rules)
    return await _get_script(request)


async def _get_faults(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATE_KEY].faults.config.model_dump())


async def _set_faults(request: web.Request) -> web.Response:
    config = parse_model(FaultConfig, await read_json_object(request))
    request.app[STATE_KEY].faults.replace(config)
    return web.json_response(config.model_dump())


async def _reset(request: web.Request) -> web.Response:
    state = request.app[STATE_KEY]
    state.reset()
    return web.json_response({"status": "reset"})


async def _stats(request: web.Request) -> web.Response:
    return web.json_response(request.app[STATE_KEY].stats_body())


async def _requests(request: web.Request) -> web.Response:
    return web.json_response({"requests": list(request.app[STATE_KEY].recent)})


async def _embedding_requests(request: web.Request) -> web.Response:
    return web.json_response({"requests": list(request.app[STATE_KEY].recent_embeddings)})
