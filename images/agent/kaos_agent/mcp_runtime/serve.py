"""Serving the MCP app with uvicorn under the connection limits every KAOS server applies.

uvicorn (0.55, h11 and httptools alike) arms its keep-alive timer only after a response
(``on_response_complete``) and cancels it on every ``data_received``: a fresh connection
that never sends a request head, one that sends half a head, or one that drips a byte now
and then is never closed (verified: with ``timeout_keep_alive=2`` such sockets were still
open after 10 s, while an idle keep-alive connection was closed after 2 s).
``GuardedH11Protocol`` arms a timer of its own in ``connection_made`` and again after each
answer, and incoming data does not cancel it; when it fires, a connection with no request
in flight is closed. So ``idle_timeout``
bounds silent, half-sent and idle keep-alive connections as aiohttp's keep-alive timer
does for the other services; a stalled body is the ``BodyGuard``'s (408).

The cap is ``kaos_core.http.server``'s ``ConnectionGuard`` and ``GuardedListener``, not
uvicorn's ``limit_concurrency``: that one answers 503 to every request once that many
connections are open, idle ones included, so a flood of idle sockets would lock out the
health probes, and it does nothing against ``accept()`` running into the open-file limit.

The loop is asyncio's own (``loop="asyncio"``), not uvloop: libuv calls ``accept()`` in C,
so the ``GuardedListener`` that keeps the process below its open-file limit would never
be asked. The protocol is always h11: it is what the agent image has (uvicorn without
extras; httptools only comes into a development environment with other packages), so
tests run the protocol production runs. WebSockets are off: MCP does not use them, and an
upgraded connection would leave the protocol the guard counts.
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
from typing import Any

import uvicorn
from kaos_core.http.limits import HttpLimits
from kaos_core.http.server import ConnectionGuard, bind_listeners
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

log = logging.getLogger(__name__)

# uvicorn's exit status when it cannot start (it had that before this module served it).
STARTUP_FAILURE = 3


class GuardedConfig(uvicorn.Config):
    """uvicorn's config with the guard and the idle timeout its protocol reads."""

    def __init__(
        self,
        app: Any,
        *,
        guard: ConnectionGuard[GuardedH11Protocol],
        idle_timeout: float,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            app,
            http=GuardedH11Protocol,
            ws="none",
            loop="asyncio",
            # uvicorn's own timer (whole seconds) stays in place; ours is the exact one.
            timeout_keep_alive=max(1, math.ceil(idle_timeout)),
            **kwargs,
        )
        self.guard = guard
        self.idle_timeout = idle_timeout


class GuardedH11Protocol(H11Protocol):
    """h11 protocol counted by the guard, with a timer for a complete request head."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        if not isinstance(config, GuardedConfig):
            raise TypeError("GuardedH11Protocol is served with a GuardedConfig")
        self.guard = config.guard
        self.idle_timeout = config.idle_timeout
        self.muted = False  # refused by the guard: whatever arrives is ignored
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.guard.admit(self, transport):
            self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self.guard.release(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.muted:
            super().data_received(data)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # Waiting for the next request head from here (or for a pipelined request's
        # answer, after which this runs again).
        if not self.transport.is_closing():
            self._arm_head_timer()

    def idle(self) -> bool:
        """No request in flight: waiting for (the rest of) a request head."""
        return self.cycle is None or self.cycle.response_complete

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.idle_timeout, self._head_timeout)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        # A request in flight re-arms the timer when its answer is complete.
        if self.idle() and not self.transport.is_closing():
            self.transport.close()


def _idle(protocol: GuardedH11Protocol) -> bool:
    return protocol.idle() and not protocol.transport.is_closing()


def _close(protocol: GuardedH11Protocol) -> None:
    protocol.transport.close()


def _mute(protocol: GuardedH11Protocol) -> None:
    protocol.muted = True


def serve(
    app: Any,
    *,
    host: str,
    port: int,
    limits: HttpLimits,
    timeout_graceful_shutdown: int = 30,
) -> None:
    """Serve ``app`` until SIGTERM or SIGINT (uvicorn's graceful shutdown)."""
    cap = limits.connection_cap()
    guard: ConnectionGuard[GuardedH11Protocol] = ConnectionGuard(
        cap, is_idle=_idle, close=_close, mute=_mute
    )
    config = GuardedConfig(
        app,
        guard=guard,
        idle_timeout=limits.idle_timeout,
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=timeout_graceful_shutdown,
        backlog=1024,
    )
    try:
        listeners = bind_listeners(host, port, guard)
    except OSError as exc:
        log.error("cannot listen", extra={"host": host, "port": port, "error": str(exc)})
        raise SystemExit(STARTUP_FAILURE) from None
    log.info("listening", extra={"host": host, "port": port, "max_connections": cap})
    server = uvicorn.Server(config)
    sockets: list[socket.socket] = list(listeners)
    try:
        server.run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)
