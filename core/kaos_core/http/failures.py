"""Fixed words for a failed outgoing HTTP call, so no exception text travels on.

A delegation, a tool call or a memory call that fails becomes a message for a model, a
client or a status; an exception's class name or text (internal addresses, library
internals) must not be in it. ``describe_failure`` names what happened in words a reader
can act on; callers log the exception itself.
"""

from __future__ import annotations

import aiohttp


def describe_failure(exc: BaseException) -> str:
    """What went wrong with an outgoing call, without the exception's text."""
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return "timed out"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "could not connect"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the server closed the connection"
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "the answer was cut off"
    if isinstance(exc, aiohttp.ClientResponseError):
        return f"answered HTTP {exc.status}"
    if isinstance(exc, aiohttp.ClientError):
        return "the connection failed"
    if isinstance(exc, ValueError):
        return "the answer could not be read"
    return "failed"
