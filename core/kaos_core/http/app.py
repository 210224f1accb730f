"""The base application every service builds on.

``create_base_app`` gives an ``web.Application`` with the one middleware (request ids,
JSON errors, request metrics), ``/healthz``, ``/readyz`` and ``/metrics``. Services add
their routes and ``cleanup_ctx`` entries to it in their own ``create_app(settings)``.
"""

from __future__ import annotations

import logging

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kaos_core.health import Readiness
from kaos_core.http.keys import (
    HTTP_METRICS_KEY,
    MAX_BODY_KEY,
    READINESS_KEY,
    REGISTRY_KEY,
    SERVICE_NAME_KEY,
)
from kaos_core.http.middleware import add_request_id_header, error_middleware
from kaos_core.metrics import HttpMetrics

log = logging.getLogger(__name__)


def create_base_app(
    service: str,
    *,
    max_body_bytes: int = 1024 * 1024,
    registry: CollectorRegistry | None = None,
) -> web.Application:
    """An application with the shared middleware and the health and metrics routes."""
    app = web.Application(middlewares=[error_middleware], client_max_size=max_body_bytes)
    reg = registry if registry is not None else CollectorRegistry()
    app[REGISTRY_KEY] = reg
    app[HTTP_METRICS_KEY] = HttpMetrics.create(reg, namespace=service.replace("-", "_"))
    app[READINESS_KEY] = Readiness()
    app[SERVICE_NAME_KEY] = service
    app[MAX_BODY_KEY] = max_body_bytes
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

    aiohttp's runner turns both signals into a graceful exit: it stops accepting, lets
    in-flight requests finish for up to ``shutdown_timeout`` seconds, then runs the
    ``cleanup_ctx`` generators in reverse order (which drain executors and close pools).
    """
    log.info("listening", extra={"host": host, "port": port})
    web.run_app(
        app,
        host=host,
        port=port,
        shutdown_timeout=shutdown_timeout,
        print=None,
        access_log=None,
        handle_signals=True,
    )
