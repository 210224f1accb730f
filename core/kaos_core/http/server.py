"""Serving an application with the connection limits of ``kaos_core.http.limits``.

aiohttp already closes a connection whose request head does not arrive within its
keep-alive timeout, counted from the connection's start or from the previous answer, so
``idle_timeout`` bounds idle, silent and half-sent connections alike. What it lacks is a
cap on open connections: ``GuardedServer`` keeps at most ``max_connections`` per process.
Beyond it the longest-open connection that has no request in flight is closed to make
room (so a flood of idle sockets cannot lock out a health probe), and only when every
connection is busy is the newcomer answered ``503`` and closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from aiohttp import web, web_protocol, web_server

log = logging.getLogger(__name__)

_BUSY_BODY = json.dumps(
    {
        "error": {
            "code": "too_many_connections",
            "message": "the server has too many open connections; retry shortly",
        },
        "request_id": "",
    }
).encode()
BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\n"
    b"Content-Type: application/json\r\n"
    b"Content-Length: " + str(len(_BUSY_BODY)).encode() + b"\r\n"
    b"Retry-After: 1\r\n"
    b"Connection: close\r\n\r\n" + _BUSY_BODY
)


def _is_idle(handler: web_protocol.RequestHandler) -> bool:
    # aiohttp keeps no public notion of "waiting for a request"; these are the attributes
    # its RequestHandler (3.14) sets while a request is queued or being handled.
    return (
        not getattr(handler, "_force_close", False)
        and getattr(handler, "_current_request", None) is None
        and not getattr(handler, "_request_in_progress", False)
        and not getattr(handler, "_messages", ())
    )


class GuardedServer(web_server.Server):
    """aiohttp's low-level server with a cap on open connections."""

    def __init__(self, *args: Any, max_connections: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_connections = max_connections
        self.evicted = 0
        self.refused = 0

    def connection_made(
        self, handler: web_protocol.RequestHandler, transport: asyncio.Transport
    ) -> None:
        super().connection_made(handler, transport)
        live = [h for h in self.connections if not getattr(h, "_force_close", False)]
        if len(live) <= self.max_connections:
            return
        victim = next((h for h in live if h is not handler and _is_idle(h)), None)
        if victim is not None:
            self.evicted += 1
            victim.force_close()
            return
        self.refused += 1
        log.warning(
            "connection refused: too many open connections",
            extra={"max_connections": self.max_connections},
        )
        transport.write(BUSY_RESPONSE)
        handler.force_close()


class GuardedRunner(web.AppRunner):
    """An ``AppRunner`` whose server is a ``GuardedServer``."""

    def __init__(self, app: web.Application, *, max_connections: int, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._max_connections = max_connections

    async def _make_server(self) -> web_server.Server:
        server = await super()._make_server()
        # Rebuild with the same handler and options; aiohttp builds the plain one here.
        return GuardedServer(
            server.request_handler,
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            max_connections=self._max_connections,
            **server._kwargs,
        )
