"""Spans and W3C trace context for aiohttp, server and client side.

A small mechanism of our own: the OpenTelemetry aiohttp instrumentations pin semantic
conventions releases that no SDK release compatible with the MCP SDK's floor
(``opentelemetry-api>=1.45.2``) accepts. Installed by ``kaos_core.telemetry.sdk`` only
when tracing is on: every ``web.Application`` created afterwards gets ``server_middleware``
first (a SERVER span per request, continuing the caller's trace from its ``traceparent``;
probes and scrapes are not traced), and every ``aiohttp.ClientSession`` gets
``client_trace_config`` (a CLIENT span per request, its context injected into the request
headers). Attributes follow the HTTP conventions; no header values and no query strings
are recorded.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp import web
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import SpanKind, StatusCode

# Probes and scrapes every few seconds would bury the requests worth reading.
UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
_TRACER = trace.get_tracer("kaos_core.telemetry.http")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _route(request: web.Request) -> str | None:
    info = request.match_info.route.resource
    return None if info is None else info.canonical


@web.middleware
async def server_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.path in UNTRACED_PATHS:
        return await handler(request)
    route = _route(request)
    attributes: dict[str, Any] = {
        "http.request.method": request.method,
        "url.path": request.path,
        "url.scheme": request.scheme,
    }
    if route is not None:
        attributes["http.route"] = route
    with _TRACER.start_as_current_span(
        f"{request.method} {route or ''}".strip(),
        context=extract(request.headers),
        kind=SpanKind.SERVER,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            response = await handler(request)
        except web.HTTPException as exc:
            _status(span, exc.status, server=True)
            raise
        except Exception as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(StatusCode.ERROR, type(exc).__name__)
            raise
        _status(span, response.status, server=True)
        return response


def _status(span: trace.Span, status: int, *, server: bool) -> None:
    span.set_attribute("http.response.status_code", status)
    # A server's 4xx is the caller's error; a client sees every 4xx and 5xx as failed.
    if status >= 500 or (not server and status >= 400):
        span.set_attribute("error.type", str(status))
        span.set_status(StatusCode.ERROR)


async def _on_start(
    session: aiohttp.ClientSession, ctx: SimpleNamespace, params: aiohttp.TraceRequestStartParams
) -> None:
    attributes: dict[str, str | int] = {
        "http.request.method": params.method,
        "server.address": params.url.host or "",
        "url.full": str(params.url.with_query(None)),
    }
    if params.url.port is not None:
        attributes["server.port"] = params.url.port
    span = _TRACER.start_span(params.method, kind=SpanKind.CLIENT, attributes=attributes)
    ctx.otel_span = span
    inject(params.headers, context=trace.set_span_in_context(span))


async def _on_end(
    session: aiohttp.ClientSession, ctx: SimpleNamespace, params: aiohttp.TraceRequestEndParams
) -> None:
    span = getattr(ctx, "otel_span", None)
    if span is not None:
        _status(span, params.response.status, server=False)
        span.end()


async def _on_exception(
    session: aiohttp.ClientSession,
    ctx: SimpleNamespace,
    params: aiohttp.TraceRequestExceptionParams,
) -> None:
    span = getattr(ctx, "otel_span", None)
    if span is not None:
        span.set_attribute("error.type", type(params.exception).__name__)
        span.set_status(StatusCode.ERROR, type(params.exception).__name__)
        span.end()


def client_trace_config() -> aiohttp.TraceConfig:
    config = aiohttp.TraceConfig()
    config.on_request_start.append(_on_start)
    config.on_request_end.append(_on_end)
    config.on_request_exception.append(_on_exception)
    return config


def install() -> None:
    """Trace every application and client session created from now on (idempotent)."""
    if getattr(web.Application, "_kaos_traced", False):
        return
    app_init = web.Application.__init__
    session_init = aiohttp.ClientSession.__init__

    @functools.wraps(app_init)
    def traced_app_init(self: web.Application, *args: Any, **kwargs: Any) -> None:
        kwargs["middlewares"] = [server_middleware, *kwargs.get("middlewares", ())]
        app_init(self, *args, **kwargs)

    @functools.wraps(session_init)
    def traced_session_init(self: aiohttp.ClientSession, *args: Any, **kwargs: Any) -> None:
        kwargs["trace_configs"] = [*(kwargs.get("trace_configs") or ()), client_trace_config()]
        session_init(self, *args, **kwargs)

    web.Application.__init__ = traced_app_init  # type: ignore[method-assign]
    aiohttp.ClientSession.__init__ = traced_session_init  # type: ignore[method-assign]
    web.Application._kaos_traced = True  # type: ignore[attr-defined]


__all__ = ["UNTRACED_PATHS", "client_trace_config", "install", "server_middleware"]
