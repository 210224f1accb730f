"""Connection limits every KAOS HTTP server applies, from ``KAOS_HTTP_*`` variables.

The same variables hold for every service (memory, agent, operator, devmodel, MCP
runtime), so an operator tunes them once. Defaults keep a well-behaved client unaware of
them and bound what an idle, slow or flooding one can hold: a connection that does not
deliver a complete request head within ``idle_timeout`` (fresh or between keep-alive
requests) is closed; a body that does not arrive within ``body_timeout`` is a 408; at most
``max_connections`` are open per process (by default derived from the open-file limit, so
the accept loop never runs out of descriptors).

The cap is always kept below the open-file limit: besides the open connections, a server
holds connections it has accepted but not yet handed to the protocol and connections it
is closing (``ACCEPT_HEADROOM`` of them at most, see ``kaos_core.http.server``), and the
service's own files (``FD_RESERVE``). A ``KAOS_HTTP_MAX_CONNECTIONS`` above what the limit
allows is lowered to it, since the alternative is ``accept()`` failing with EMFILE.
"""

from __future__ import annotations

import resource
from typing import ClassVar

from kaos_core.settings import SettingsGroup, setting

# Descriptors kept for everything a service opens besides client connections (stores,
# pools, log files, the listening socket, worker threads' files).
FD_RESERVE = 128
# Connections a server may hold beyond the cap for a moment: accepted but not yet seen by
# the protocol (asyncio accepts a whole batch per wake-up), or being closed to make room.
ACCEPT_HEADROOM = 32
DEFAULT_MAX_CONNECTIONS = 4096
MIN_CONNECTIONS = 16


class HttpLimits(SettingsGroup):
    """Timeouts and the connection cap of one HTTP server process."""

    env_prefix: ClassVar[str | None] = "KAOS_HTTP_"
    title: ClassVar[str] = "Connection limits (every KAOS server)"

    idle_timeout: float = setting(
        "Seconds a connection may stay without a complete request head "
        "(a fresh connection, a half-sent request, an idle keep-alive connection).",
        default=15.0,
        gt=0,
        le=3600,
    )
    body_timeout: float = setting(
        "Seconds a request body may take to arrive in full; then 408.",
        default=30.0,
        gt=0,
        le=3600,
    )
    max_connections: int = setting(
        "Open connections per process; beyond it an idle connection is "
        "closed to make room, or the new one answered 503 when none is idle. "
        "0: the open-file limit less a reserve, at most "
        f"{DEFAULT_MAX_CONNECTIONS}. Never more than the open-file limit allows.",
        default=0,
        ge=0,
    )

    max_header_bytes: int = setting(
        "Bytes of one request header (its value, and its name); a larger one "
        "is answered 400 before any handler runs. The default admits a credential header "
        "of 64 KiB, so an oversize token reaches the token verifier and is refused with a "
        "401 that says why. Not applied by the MCP runtime (uvicorn's own limits).",
        default=72 * 1024,
        ge=1024,
        le=1024 * 1024,
    )
    max_headers: int = setting(
        "Request headers per request; more is answered 400. With "
        "max_header_bytes it bounds what one request head can hold in memory.",
        default=64,
        ge=16,
        le=1024,
    )

    def connection_cap(self) -> int:
        """Open connections allowed: the setting, or derived from the open-file limit."""
        fd_room = _fd_room()
        if self.max_connections > 0:
            return self.max_connections if fd_room is None else min(self.max_connections, fd_room)
        return DEFAULT_MAX_CONNECTIONS if fd_room is None else min(DEFAULT_MAX_CONNECTIONS, fd_room)


def _fd_room() -> int | None:
    """Connections the soft open-file limit leaves room for (``None``: no limit)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return None
    return max(MIN_CONNECTIONS, soft - FD_RESERVE - ACCEPT_HEADROOM)
