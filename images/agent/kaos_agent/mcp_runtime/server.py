"""Serves loaded tool functions with the official ``mcp`` SDK over streamable HTTP.

``/mcp`` is the MCP endpoint (stateless streamable HTTP, so any replica can answer any
request); ``/healthz`` and ``/readyz`` answer 200 once the tools are loaded; ``/metrics``
counts tool calls by tool and outcome. The SDK's Host-header check (DNS-rebinding
protection) is configured from ``MCP_ALLOWED_HOSTS``: ``*`` turns it off, which in-cluster
service names need; a list keeps it on for exactly those hosts.

With ``MCP_AUTH_MODE`` on, every ``/mcp`` request first passes ``CallerCheck``
(``kaos_agent.mcp_runtime.auth``): only the agents listed in the callers file, and the lister
for listing only, are served.

Every ``/mcp`` request passes ``BodyGuard`` (``kaos_agent.mcp_runtime.guard``) first: the
body is read within ``MCP_MAX_BODY_BYTES`` and ``KAOS_HTTP_BODY_TIMEOUT`` and decoded by
the same edge step as the other KAOS services, so hostile JSON is a JSON-RPC error, never
a 500 and never a tool call.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from kaos_agent.mcp_runtime.auth import CallerCheck, McpGate, check_listing
from kaos_agent.mcp_runtime.guard import BodyGuard
from kaos_agent.mcp_runtime.settings import McpServer, McpSettings

log = logging.getLogger(__name__)

MCP_PATH = "/mcp"
# Any replica can answer any request: no sessions, so no server-to-client stream either.
STATELESS = True


def _failure(name: str, exc: Exception) -> ToolError:
    # The SDK hides the text of unexpected exceptions; a configured tool's own error
    # message is what the calling model needs to adapt, so it is passed on (without the
    # exception's class: the caller cannot act on it, and it names the runtime's insides).
    if isinstance(exc, ToolError):
        return exc
    log.warning("tool failed", extra={"tool": name}, exc_info=exc)
    text = str(exc).strip()
    return ToolError(f"{name} failed: {text}" if text else f"{name} failed")


def _counted(fn: Callable[..., Any], calls: Counter) -> Callable[..., Any]:
    """``fn`` with its calls counted and its errors readable by the caller.

    ``functools.wraps`` keeps the signature and docstring, from which the SDK builds the
    tool's schema and description.
    """
    name = fn.__name__
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                result = await fn(*args, **kwargs)
            except Exception as exc:
                calls.labels(name, "error").inc()
                raise _failure(name, exc) from exc
            calls.labels(name, "ok").inc()
            return result

        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:
            calls.labels(name, "error").inc()
            raise _failure(name, exc) from exc
        calls.labels(name, "ok").inc()
        return result

    return wrapper


def transport_security(settings: McpServer) -> TransportSecuritySettings:
    hosts = settings.allowed_host_list()
    if not hosts or "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts],
    )


def create_mcp_app(settings: McpSettings, tools: dict[str, Callable[..., Any]]) -> Starlette:
    """The app ``kaos-mcp`` serves, under the settings' connection limits."""
    limits, server_settings = settings.limits, settings.server
    registry = CollectorRegistry()
    calls = Counter(
        "tool_calls",
        "MCP tool calls, by tool and outcome.",
        ["tool", "outcome"],
        namespace="kaos_mcp",
        registry=registry,
    )
    server: MCPServer[Any] = MCPServer(name=server_settings.name)
    for name, fn in sorted(tools.items()):
        server.add_tool(_counted(fn, calls), name=name)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        return JSONResponse({"status": "ready", "tools": sorted(tools)})

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=STATELESS,
        transport_security=transport_security(server_settings),
        host=server_settings.host,
        # The guard enforces the limit first; the SDK's own check is set to the same.
        max_request_body_size=server_settings.max_body_bytes,
    )
    gate = McpGate.build(settings.callers.settings(), settings.listing.service_account())
    app.add_middleware(
        BodyGuard,
        path=MCP_PATH,
        max_body_bytes=server_settings.max_body_bytes,
        body_timeout=limits.body_timeout,
        stateless=STATELESS,
        message_check=None if gate is None else check_listing,
    )
    if gate is not None:
        # Added last, so outermost: a caller is admitted on its headers before its body
        # is read.
        app.add_middleware(CallerCheck, gate=gate)
    app.router.routes.extend(
        [
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ]
    )
    return app
