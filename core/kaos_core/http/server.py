"""Connection hygiene shared by every KAOS HTTP server (the aiohttp services here, the MCP
runtime's uvicorn in ``kaos_agent.mcp_runtime.serve``).

Timeouts. aiohttp (3.14) arms its keep-alive timer in ``RequestHandler.connection_made``
and does not re-arm it when partial data arrives; when it fires, a connection still
waiting for a complete request head is closed. With ``keepalive_timeout=idle_timeout``
a fresh connection that sends nothing, one that sends half a request head and one that
drips a head a byte at a time are all closed ``idle_timeout`` after they opened, and an
idle keep-alive connection ``idle_timeout`` after its last answer (verified against
3.14.5). The timer never cuts a request being handled; a body that stalls is the body
timeout's (``kaos_core.http.body``, 408), and the rest of a body nobody reads is drained
for at most ``lingering_time`` after the answer, which ``run_service`` bounds too.

The cap. ``ConnectionGuard`` keeps at most ``max_connections`` open. Beyond it the
longest-open connection with no request in flight (idle, silent or half-sent alike) is
closed to make room, so a flood of idle sockets cannot lock out a health probe; only when
every connection is busy is the newcomer answered ``503`` (``BUSY_RESPONSE``). A client
usually sends its request at once: closing a socket with unread input sends a reset,
which can destroy the answer on its way, so the refused connection is half-closed
instead (answer, then end of stream), what it sends is read and ignored, and it is
closed when the client closes or ``REFUSAL_LINGER`` seconds later.

The listener. asyncio accepts up to ``backlog`` connections each time the listening
socket wakes it, before any of them reaches the protocol, so a cap enforced in
``connection_made`` comes too late: when more connections arrive together than the
open-file limit leaves room for, ``accept()`` runs into EMFILE, and asyncio logs an error
for every failed ``accept()`` of each batch (a "Too many open files" flood).
``GuardedListener`` is a listening socket whose ``accept()`` asks the guard first: while
connections open,
accepted-but-unseen and closing together fill ``max_connections + headroom`` it reports
"nothing to accept", so the process stays below its open-file limit (``HttpLimits``
derives the cap from that limit, less the headroom and a reserve for the service's own
files). Should ``accept()`` fail with EMFILE anyway (the service's own files grew past
the reserve), asyncio reports it and pauses accepting for a second; the listener makes
that one line per pause instead of one per remaining slot of the batch.

aiohttp's internals. aiohttp has no public notion of a connection waiting for a request,
nor a way to give ``AppRunner`` another ``Server``: the guard reads ``RequestHandler``'s
private state and rebuilds the runner's server from its private options. Both were
verified on aiohttp ``VERIFIED_AIOHTTP`` (the minor version the dependency pin allows);
``check_aiohttp_internals`` refuses to start a server on an aiohttp that lacks them, and
logs a warning on another minor version that still has them. A server-side connection
limit in aiohttp itself would retire all of it (asked for in aio-libs/aiohttp#675, which
aiohttp declined as the application's duty).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import socket
import time
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

import aiohttp
from aiohttp import web, web_protocol, web_server

from kaos_core.http.limits import ACCEPT_HEADROOM

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

# An accepted socket reaches the protocol within a few loop iterations; one that has not
# after this long never will (its setup failed), and stops counting against the budget.
PENDING_TTL = 5.0
# How long the listener leaves waiting connections in the kernel's queue while the budget
# is full of connections about to free their place (accepted ones not yet seen by the
# protocol, evicted ones closing): normally a few loop iterations, longer on a starved
# CPU. Meanwhile the readable listener wakes the loop at every iteration; past it, or at
# once when the budget is full of refused connections (every connection busy), waiting
# connections are answered 503 and closed by the listener, so the loop cannot keep
# spinning.
FULL_GRACE = 1.0
# How long a refused connection may stay half-closed for its client to read the 503.
REFUSAL_LINGER = 1.0
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

C = TypeVar("C", bound=Hashable)


def _fd(transport: asyncio.BaseTransport) -> int:
    sock = transport.get_extra_info("socket")
    return int(sock.fileno()) if sock is not None else -1


class ConnectionGuard(Generic[C]):
    """The open connections of one server process, capped at ``max_connections``.

    ``C`` is the server's per-connection object (aiohttp's ``RequestHandler``, a uvicorn
    protocol); ``is_idle`` says whether one has no request in flight, ``close`` closes it,
    and ``mute`` makes it ignore whatever arrives, leaving its transport to the guard.
    """

    def __init__(
        self,
        max_connections: int,
        *,
        is_idle: Callable[[C], bool],
        close: Callable[[C], None],
        mute: Callable[[C], None],
        headroom: int = ACCEPT_HEADROOM,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_connections < 1 or headroom < 1:
            raise ValueError("max_connections and headroom must be at least 1")
        self.max_connections = max_connections
        self.headroom = headroom
        self._is_idle = is_idle
        self._close = close
        self._mute = mute
        self._clock = clock
        # Insertion order is opening order: the first idle entry is the longest-open one.
        self._open: dict[C, asyncio.BaseTransport] = {}
        self._evicting: dict[C, asyncio.BaseTransport] = {}  # gone within an iteration
        self._refusing: dict[C, asyncio.BaseTransport] = {}  # up to REFUSAL_LINGER
        self._pending: dict[int, float] = {}  # fd -> when accepted
        self.evicted = 0
        self.refused = 0

    @property
    def open_count(self) -> int:
        return len(self._open)

    def held(self) -> int:
        """Descriptors of client connections: open, accepted but unseen, and closing."""
        self._expire_pending()
        return len(self._open) + len(self._evicting) + len(self._refusing) + len(self._pending)

    def has_room(self) -> bool:
        """Whether one more connection may be accepted without nearing the fd limit."""
        return self.held() < self.max_connections + self.headroom

    def room_coming(self) -> bool:
        """Whether some held descriptors are about to be free (pending or evicted ones)."""
        self._expire_pending()
        return bool(self._pending or self._evicting)

    def accepted(self, fd: int) -> None:
        self._pending.pop(fd, None)
        self._pending[fd] = self._clock()

    def admit(self, conn: C, transport: asyncio.BaseTransport) -> bool:
        """Count a new connection; ``False`` when it was refused (answered 503, closing)."""
        self._pending.pop(_fd(transport), None)
        self._open[conn] = transport
        if len(self._open) <= self.max_connections:
            return True
        victim = next((c for c in self._open if c is not conn and self._is_idle(c)), None)
        if victim is not None:
            self.evicted += 1
            self._evict(victim)
            return True
        self.refused += 1
        self._refuse(conn, transport)
        log.warning(
            "connection refused: every connection is busy",
            extra={"max_connections": self.max_connections},
        )
        return False

    def release(self, conn: C) -> None:
        """The connection is gone (its transport's ``connection_lost``)."""
        self._open.pop(conn, None)
        self._evicting.pop(conn, None)
        self._refusing.pop(conn, None)

    def _evict(self, conn: C) -> None:
        transport = self._open.pop(conn)
        self._evicting[conn] = transport
        self._close(conn)
        if not transport.is_closing():
            transport.close()
        # A graceful close waits until buffered output is sent; a peer that does not read
        # would keep an evicted connection (and its descriptor) forever.
        if isinstance(transport, asyncio.WriteTransport) and transport.get_write_buffer_size() > 0:
            transport.abort()

    def _refuse(self, conn: C, transport: asyncio.BaseTransport) -> None:
        self._refusing[conn] = self._open.pop(conn)
        self._mute(conn)
        if not isinstance(transport, asyncio.WriteTransport):
            transport.close()
            return
        transport.write(BUSY_RESPONSE)
        if transport.can_write_eof():
            transport.write_eof()
        # Closed at the client's end of stream (the protocol's eof_received), else then.
        asyncio.get_running_loop().call_later(REFUSAL_LINGER, transport.close)

    def _expire_pending(self) -> None:
        if not self._pending:
            return
        horizon = self._clock() - PENDING_TTL
        while self._pending:
            fd, since = next(iter(self._pending.items()))
            if since > horizon:
                break
            del self._pending[fd]


class GuardedListener(socket.socket):
    """A listening socket that accepts only while its guard has room (see the module)."""

    def __init__(
        self,
        family: int,
        guard: ConnectionGuard[Any],
        *,
        proto: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(family, socket.SOCK_STREAM, proto)
        self.guard = guard
        self._clock = clock
        self._paused_after_error = False
        self._full_since: float | None = None

    def accept(self) -> tuple[socket.socket, Any]:
        if self._paused_after_error:
            # asyncio, having reported EMFILE and paused this listener for a second, calls
            # accept() again for the rest of its batch: end the batch without a report.
            self._paused_after_error = False
            raise BlockingIOError(errno.EAGAIN, "accepting paused")
        if not self.guard.has_room():
            now = self._clock()
            if self._full_since is None:
                self._full_since = now
            if self.guard.room_coming() and now - self._full_since < FULL_GRACE:
                raise BlockingIOError(errno.EAGAIN, "no room for another connection yet")
            self._refuse_waiting()
        self._full_since = None
        conn, addr = self._accept_one()
        self.guard.accepted(conn.fileno())
        return conn, addr

    def _accept_one(self) -> tuple[socket.socket, Any]:
        try:
            return super().accept()
        except OSError as exc:
            if exc.errno in _RESOURCE_ERRNOS:
                self._paused_after_error = True
            raise

    def _refuse_waiting(self) -> None:
        """Answer every waiting connection 503 and close it; ends with BlockingIOError."""
        while True:
            conn, _ = self._accept_one()
            self.guard.refused += 1
            with conn, contextlib.suppress(OSError):
                conn.setblocking(False)
                # Best effort, and at once (a last resort: the budget stayed full): a fresh
                # socket's send buffer takes the whole answer, and reading what already
                # arrived spares it the reset that unread input would cause.
                conn.send(BUSY_RESPONSE)
                conn.shutdown(socket.SHUT_WR)
                while conn.recv(65536):
                    pass


def bind_listeners(
    host: str | None, port: int, guard: ConnectionGuard[Any]
) -> list[GuardedListener]:
    """Bound (not yet listening) sockets for ``host``:``port``, as asyncio would make them.

    ``loop.create_server(sock=...)`` and ``uvicorn.Server.run(sockets=...)`` then listen
    on them and call their ``accept()``.
    """
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    listeners: list[GuardedListener] = []
    seen: set[tuple[int, Any]] = set()
    try:
        for family, _type, proto, _name, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            sock = GuardedListener(family, guard, proto=proto)
            listeners.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                # As asyncio does: an IPv6 socket does not also take IPv4 connections.
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
    except BaseException:
        for sock in listeners:
            sock.close()
        raise
    return listeners


# The aiohttp (major, minor) the private attributes below were verified on.
VERIFIED_AIOHTTP = (3, 14)
# What the guard reads of aiohttp's RequestHandler: set while a request is queued or being
# handled, or once the connection is closing.
_HANDLER_STATE = ("_force_close", "_current_request", "_request_in_progress", "_messages")


def _aiohttp_version() -> tuple[int, int]:
    major, minor = aiohttp.__version__.split(".")[:2]
    return int(major), int(minor)


def check_aiohttp_internals() -> None:
    """Refuse (``RuntimeError``) an aiohttp without the private attributes the guard uses;
    warn on a minor version they were not verified on."""
    missing = [name for name in _HANDLER_STATE if not hasattr(web_protocol.RequestHandler, name)]
    if not hasattr(web.AppRunner, "_make_server"):
        missing.append("AppRunner._make_server")
    if missing:
        raise RuntimeError(
            f"aiohttp {aiohttp.__version__} lacks {', '.join(missing)}, which the connection"
            f" guard (kaos_core.http.server) reads; it was verified on aiohttp"
            f" {'.'.join(map(str, VERIFIED_AIOHTTP))}: install that version"
        )
    if _aiohttp_version() != VERIFIED_AIOHTTP:
        log.warning(
            "aiohttp version not verified for the connection guard",
            extra={
                "aiohttp": aiohttp.__version__,
                "verified": ".".join(map(str, VERIFIED_AIOHTTP)),
            },
        )


def _handler_idle(handler: web_protocol.RequestHandler) -> bool:
    return (
        not handler._force_close
        and handler._current_request is None
        and not handler._request_in_progress
        and not handler._messages
    )


def _handler_close(handler: web_protocol.RequestHandler) -> None:
    handler.force_close()


def _handler_mute(handler: web_protocol.RequestHandler) -> None:
    # What ``force_close`` sets, without closing the transport: the handler then ignores
    # incoming data, arms no keep-alive close, and starts no request loop.
    handler._force_close = True


def aiohttp_guard(max_connections: int) -> ConnectionGuard[web_protocol.RequestHandler]:
    """A guard for an aiohttp server's connections (``RuntimeError`` on an aiohttp whose
    internals it cannot use)."""
    check_aiohttp_internals()
    return ConnectionGuard(
        max_connections, is_idle=_handler_idle, close=_handler_close, mute=_handler_mute
    )


class GuardedServer(web_server.Server):
    """aiohttp's low-level server, its connections counted by a ``ConnectionGuard``."""

    def __init__(
        self, *args: Any, guard: ConnectionGuard[web_protocol.RequestHandler], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.guard = guard

    def connection_made(
        self, handler: web_protocol.RequestHandler, transport: asyncio.Transport
    ) -> None:
        super().connection_made(handler, transport)
        # A refused handler is muted here, before aiohttp starts its request loop.
        self.guard.admit(handler, transport)

    def connection_lost(
        self, handler: web_protocol.RequestHandler, exc: BaseException | None = None
    ) -> None:
        super().connection_lost(handler, exc)
        self.guard.release(handler)


class GuardedRunner(web.AppRunner):
    """An ``AppRunner`` whose server is a ``GuardedServer``."""

    def __init__(
        self,
        app: web.Application,
        *,
        guard: ConnectionGuard[web_protocol.RequestHandler],
        **kwargs: Any,
    ) -> None:
        super().__init__(app, **kwargs)
        self.guard = guard

    async def _make_server(self) -> web_server.Server:
        server = await super()._make_server()
        # Rebuild with the same handler and options (private: see the module docstring);
        # aiohttp builds the plain one here.
        return GuardedServer(
            server.request_handler,
            request_factory=server.request_factory,
            handler_cancellation=server.handler_cancellation,
            guard=self.guard,
            **server._kwargs,
        )
