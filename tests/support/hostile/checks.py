"""The properties every service holds for every hostile request (see the package's
docstring), and the "no write" check of a refused one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tests.support.hostile.client import Exchange, send
from tests.support.hostile.request import Expect, RawRequest
from tests.support.leaks import LEAK_RE


def is_rpc_error(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("error"), dict)
        and isinstance(doc["error"].get("code"), int)
        and isinstance(doc["error"].get("message"), str)
    )


def is_kaos_error(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("error"), dict)
        and isinstance(doc["error"].get("code"), str)
        and isinstance(doc["error"].get("message"), str)
        and isinstance(doc.get("request_id"), str)
    )


def refused(ex: Exchange) -> bool:
    """The service turned the request down: a 4xx, a JSON-RPC error object, or an MCP tool
    result marked ``isError`` (its arguments did not validate: the tool did not run)."""
    if 400 <= ex.status < 500:
        return True
    if ex.status == 0:
        return True  # dropped: nothing was done with it (checked by ``check_exchange``)
    if not ex.request.endpoint.jsonrpc:
        return False
    try:
        docs = ex.documents()
    except ValueError:
        return False
    for doc in docs:
        if is_rpc_error(doc):
            return True
        result = doc.get("result") if isinstance(doc, dict) else None
        if isinstance(result, dict) and result.get("isError") is True:
            return True
    return False


def _is_json(ex: Exchange) -> bool:
    try:
        ex.documents()
    except ValueError:
        return False
    return True


def check_exchange(ex: Exchange) -> None:
    """The properties every service holds for every request (see the package docstring)."""
    req = ex.request
    assert not ex.hung, f"no answer within {req.deadline:g}s:\n{ex.describe()}"
    leak = LEAK_RE.search(ex.body.decode("utf-8", "replace"))
    assert leak is None, f"the answer names {leak.group()!r}:\n{ex.describe()}"
    if req.expect is Expect.STALL:
        # aiohttp closes a stalled sender's connection; a 408 may or may not get out first.
        assert ex.status in (0, 400, 408, 413), f"a stalled body is not timed out:\n{ex.describe()}"
        assert ex.elapsed <= req.deadline
        return
    assert ex.status != 0, f"the connection closed without an answer:\n{ex.describe()}"
    assert ex.status < 500, f"a server error:\n{ex.describe()}"
    if req.malformed_http and 400 <= ex.status < 500 and not _is_json(ex):
        return  # refused by the HTTP parser before any application code, in its own text
    try:
        docs = ex.documents()
    except ValueError:
        raise AssertionError(f"the answer is not JSON:\n{ex.describe()}") from None
    if ex.status >= 400:
        assert len(docs) == 1 and (is_kaos_error(docs[0]) or is_rpc_error(docs[0])), (
            f"an error answer without the error shape:\n{ex.describe()}"
        )
    if req.expect is Expect.REFUSE:
        assert refused(ex), f"a hostile request was not refused:\n{ex.describe()}"
    elif req.expect is Expect.ACCEPT:
        assert 200 <= ex.status < 300 and not refused(ex), (
            f"a valid request was not served:\n{ex.describe()}"
        )


async def run_one(
    port: int,
    req: RawRequest,
    *,
    session: str,
    snapshot: Callable[[], Any] | None = None,
) -> Exchange:
    """Send one request, check the shared properties, and for a refused request that
    ``snapshot()`` (what the service stores or calls) did not change."""
    before = None if snapshot is None else await asyncio.to_thread(snapshot)
    ex = await send(port, req, session=session)
    check_exchange(ex)
    if snapshot is not None and refused(ex):
        after = await asyncio.to_thread(snapshot)
        assert after == before, (
            f"a refused request changed state {before} -> {after}:\n{ex.describe()}"
        )
    return ex
