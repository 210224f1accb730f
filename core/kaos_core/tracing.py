"""Spans and W3C trace context for aiohttp, server and client side, and the one way a KAOS
process makes a client session.

A small mechanism of our own: the OpenTelemetry aiohttp instrumentations pin semantic
conventions releases that no SDK release compatible with the MCP SDK's floor
(``opentelemetry-api>=1.45.2``) accepts. Wired explicitly, never patched into aiohttp:
``setup_telemetry`` turns it on (``enable``) once it has installed the SDK; from then on
the app factory (``kaos_core.http.create_base_app``) puts ``server_middleware`` first (a
SERVER span per request, continuing the caller's trace from its ``traceparent``; probes
and scrapes are not traced), and ``client_session``, through which every outgoing call of
the services goes, gives each session ``client_trace_config`` (a CLIENT span per request,
its context injected into the request headers). Before that, or without tracing, neither
is wired in and nothing costs anything; a session made elsewhere is simply not traced.
Attributes follow the HTTP conventions; no header values and no query strings are
recorded.

The module depends on aiohttp and the OpenTelemetry API only, so every part of the core
(token verification included) can make its sessions here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.typedefs import Middleware
from opentelemetry import trace
from opentelemetry.propagate import extract, inject
from opentelemetry.trace import SpanKind, StatusCode

# Probes and scrapes every few seconds would bury the requests worth reading.
UNTRACED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
# The instrumentation scope these spans have always carried (queries may select on it).
_TRACER = trace.get_tracer("kaos_core.telemetry.http")
# Whether setup_telemetry installed the SDK: the hooks are wired in from then on.
_enabled = False


def enable() -> None:
    """Wire the hooks into every app and client session made from now on (called by
    ``setup_telemetry`` once the SDK is installed)."""
    global _enabled
    _enabled = True


def enabled() -> bool:
    """Whether apps and client sessions made now are traced."""
    return _enabled


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


def server_middlewares() -> list[Middleware]:
    """The tracing middleware when tracing is on (to go first: its span covers the rest of
    the chain), else none."""
    return [server_middleware] if _enabled else []


def client_session(**options: Any) -> aiohttp.ClientSession:
    """``aiohttp.ClientSession(**options)``, with the trace config when tracing is on.

    Make it inside the running event loop, after ``setup_telemetry``, as aiohttp asks."""
    given = list(options.pop("trace_configs", None) or ())
    traced = [client_trace_config()] if _enabled else []
    return aiohttp.ClientSession(trace_configs=[*given, *traced], **options)


def adopt_session(session: aiohttp.ClientSession, **options: Any) -> aiohttp.ClientSession:
    """A ``client_session`` on the connection pool of ``session``, which a library made and
    is given up (detached, so closing it closes nothing). ``options`` are the library's own
    settings of the session, repeated: aiohttp has no public way to read them back."""
    adopted = client_session(connector=session.connector, **options)
    session.detach()
    return adopted


__all__ = [
    "UNTRACED_PATHS",
    "adopt_session",
    "client_session",
    "client_trace_config",
    "enable",
    "enabled",
    "server_middleware",
    "server_middlewares",
]
