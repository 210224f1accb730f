"""The console's guard on every request.

The console acts with the user's kubeconfig identity, so a page of another site must not
be able to use it. The Host header must name the address the console is bound to (DNS
rebinding); a request that changes something (a chat turn writes memory, a forget erases
it) needs the per-process CSRF token and, when the browser sends one, an Origin equal to
the console's own; every response carries a Content-Security-Policy that allows only this
origin (no inline script, nothing from elsewhere) and is never cached. A refusal is a
``PageError``, drawn by the error pages (and with no CSRF token in it).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from aiohttp import web

from kaos_cli.ui.model import PageError
from kaos_cli.ui.state import CONFIG

CSRF_HEADER = "X-Kaos-Csrf"
CSP = (
    "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'; object-src 'none'"
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    config = request.app[CONFIG]
    if config.hosts is not None and request.host not in config.hosts:
        # A page of another site that resolved its own name to 127.0.0.1 (DNS rebinding).
        raise PageError(421, "Wrong address", "this console answers only on its own address")
    if request.method not in ("GET", "HEAD"):
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"http://{request.host}":
            raise PageError(403, "Refused", "cross-origin request refused", "forbidden")
        token = request.headers.get(CSRF_HEADER)
        if token is None and request.content_type == "application/x-www-form-urlencoded":
            token = str((await request.post()).get("csrf") or "")
        if not token or not secrets.compare_digest(token, config.csrf):
            raise PageError(
                403,
                "Refused",
                "missing or wrong CSRF token: the console restarted since this page was "
                "loaded; reload the page and try again",
                "forbidden",
            )
    return await handler(request)


async def secure_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Every response's policy headers, error pages and event streams included (an
    ``on_response_prepare`` signal: it runs as the headers leave)."""
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    # same-origin, not no-referrer: with no-referrer a form POST carries "Origin: null".
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"


async def event_stream(request: web.Request) -> web.StreamResponse:
    """A server-sent event stream, started (``secure_headers`` adds the policy)."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    return response
