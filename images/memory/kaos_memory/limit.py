"""The request concurrency limit: at most N memory requests in flight per replica.

One request more is answered at once with 429 ``too_many_requests`` and ``Retry-After``
instead of waiting, before its body is read or any tier is touched, so it changes
nothing and the client (the agent's memory client, a CLI) decides when to try again.
Only the memory API (``/v1/*``) counts: health, readiness and metrics are answered
whatever the load, so probes never fail because the service is busy.
"""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from kaos_core.errors import TooManyRequests

RETRY_AFTER_SECONDS = 1
LIMITED_PREFIX = "/v1/"


def concurrency_limit(max_in_flight: int) -> Middleware:
    """A middleware that admits ``max_in_flight`` memory requests at a time."""
    in_flight = 0

    @web.middleware
    async def limit(request: web.Request, handler: Handler) -> web.StreamResponse:
        nonlocal in_flight
        if not request.path.startswith(LIMITED_PREFIX):
            return await handler(request)
        if in_flight >= max_in_flight:
            raise TooManyRequests(
                f"the memory service is serving its limit of {max_in_flight} requests;"
                f" retry after {RETRY_AFTER_SECONDS} s",
                headers=[("Retry-After", str(RETRY_AFTER_SECONDS))],
            )
        in_flight += 1
        try:
            return await handler(request)
        finally:
            in_flight -= 1

    return limit
