"""The base application every service builds on, and the one way to serve it.

``create_base_app`` gives an ``web.Application`` with the one middleware (request ids,
JSON errors, request metrics), behind the tracing middleware when tracing is on,
``/healthz``, ``/readyz`` and ``/metrics``. Services add
their routes and ``cleanup_ctx`` entries to it in their own ``create_app(settings)``.
``run_service`` serves it with the connection limits (``kaos_core.http.limits``).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kaos_core.health import Readiness
from kaos_core.http.keys import (
    BODY_TIMEOUT_KEY,
    HTTP_METRICS_KEY,
    LIMITS_KEY,
    MAX_BODY_KEY,
    READINESS_KEY,
    REGISTRY_KEY,
    SERVICE_NAME_KEY,
)
from kaos_core.http.limits import HttpLimits
from kaos_core.http.middleware import add_request_id_header, error_middleware
from kaos_core.http.server import GuardedRunner, aiohttp_guard, bind_listeners
from kaos_core.metrics import HttpMetrics
from kaos_core.telemetry.settings import TelemetrySettings
from kaos_core.tracing import server_middlewares

log = logging.getLogger(__name__)


def create_base_app(
    service: str,
    *,
    limits: HttpLimits,
    telemetry: TelemetrySettings,
    max_body_bytes: int = 1024 * 1024,
    registry: CollectorRegistry | None = None,
) -> web.Application:
    """An application with the shared middleware and the health and metrics routes.

    ``limits`` and ``telemetry`` are groups of the service's settings: the connection limits
    it is served with (``run_service``), and its tracing.
    """
    # Tracing first (when on), so its span covers the error middleware's answer too.
    tracing = server_middlewares() if telemetry.enabled else []
    middlewares = [*tracing, error_middleware]
    app = web.Application(middlewares=middlewares, client_max_size=max_body_bytes)
    reg = registry if registry is not None else CollectorRegistry()
    app[REGISTRY_KEY] = reg
    app[HTTP_METRICS_KEY] = HttpMetrics.create(reg, namespace=service.replace("-", "_"))
    app[READINESS_KEY] = Readiness()
    app[SERVICE_NAME_KEY] = service
    app[MAX_BODY_KEY] = max_body_bytes
    app[LIMITS_KEY] = limits
    app[BODY_TIMEOUT_KEY] = limits.body_timeout
    # A signal, not the middleware, stamps the id so streamed (SSE) answers carry it too.
    app.on_response_prepare.append(add_request_id_header)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    return app


async def _healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    checks = await request.app[READINESS_KEY].evaluate()
    ready = all(v == "ok" for v in checks.values())
    body = {"status": "ready" if ready else "not_ready", "checks": checks}
    return web.json_response(body, status=200 if ready else 503)


async def _metrics(request: web.Request) -> web.Response:
    payload = generate_latest(request.app[REGISTRY_KEY])
    resp = web.Response(body=payload)
    resp.headers["Content-Type"] = CONTENT_TYPE_LATEST
    return resp


def run_service(
    app: web.Application, host: str, port: int, *, shutdown_timeout: float = 30.0
) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully.

    The runner turns both signals into a graceful exit: it stops accepting, lets
    in-flight requests finish for up to ``shutdown_timeout`` seconds, then runs the
    ``cleanup_ctx`` generators in reverse order (which drain executors and close pools).
    Connections are bounded by the app's ``HttpLimits`` (``kaos_core.http.server``):
    aiohttp's keep-alive timeout (``idle_timeout``) closes connections that deliver no
    complete request head, the ``GuardedServer`` caps how many are open, its
    ``GuardedListener`` keeps ``accept()`` below the open-file limit, and bodies are never
    decompressed.
    """
    limits = app[LIMITS_KEY]
    log.info(
        "listening",
        extra={"host": host, "port": port, "max_connections": limits.connection_cap()},
    )
    loop = asyncio.new_event_loop()
    main = loop.create_task(_serve(app, host, port, limits, shutdown_timeout))
    try:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(main)
    except (web.GracefulExit, KeyboardInterrupt):
        pass
    finally:
        try:
            if not main.done():
                main.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    loop.run_until_complete(main)
        finally:
            rest = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in rest:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            asyncio.set_event_loop(None)
            loop.close()


# aiohttp's default: how long the unread rest of a body is drained after the answer, so the
# client sees the answer rather than a reset. Bounded by the body timeout as well.
_LINGERING_TIME = 10.0


async def _serve(
    app: web.Application, host: str, port: int, limits: HttpLimits, shutdown_timeout: float
) -> None:
    guard = aiohttp_guard(limits.connection_cap())
    runner = GuardedRunner(
        app,
        guard=guard,
        handle_signals=True,
        shutdown_timeout=shutdown_timeout,
        access_log=None,
        keepalive_timeout=limits.idle_timeout,
        lingering_time=min(_LINGERING_TIME, limits.body_timeout),
        auto_decompress=False,
        max_field_size=limits.max_header_bytes,
        max_headers=limits.max_headers,
    )
    await runner.setup()
    # What the service built to start (modules, settings, clients, models) lives as long
    # as it does: out of the collector's generations, a full collection walks only what
    # requests made instead of every object since import, and a request no longer waits
    # behind a walk of them all. Collected first, so no garbage is kept frozen.
    gc.collect()
    gc.freeze()
    try:
        for sock in bind_listeners(host, port, guard):
            site = web.SockSite(runner, sock, backlog=1024)
            await site.start()
        # Serve until a signal: the runner's handlers raise GracefulExit out of the loop.
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
