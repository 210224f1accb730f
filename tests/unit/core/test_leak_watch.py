"""The suite's body watcher (``tests/fixtures/leaks.py``) catches what it is for."""

from __future__ import annotations

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from tests.fixtures import leaks


async def _leaky(request: web.Request) -> web.Response:
    return web.json_response({"error": {"code": "x", "message": "TypeError: boom"}}, status=500)


def test_it_finds_class_names_and_tracebacks_but_not_error_codes() -> None:
    assert leaks.find_leak(b'{"message": "UnicodeEncodeError at byte 3"}') == "UnicodeEncodeError"
    assert leaks.find_leak(b"Traceback (most recent call last):\n  x") is not None
    assert leaks.find_leak(b'{"code": "invalid_text", "message": "a control character"}') is None
    assert leaks.find_leak(b"a ValueErrors plural is not a class name") is None


async def test_a_leaky_body_read_through_aiohttp_is_recorded() -> None:
    app = web.Application()
    app.router.add_get("/", _leaky)
    async with (
        TestServer(app) as server,
        aiohttp.ClientSession() as http,
        http.get(server.make_url("/")) as resp,
    ):
        await resp.read()
    recorded, leaks._leaks[:] = list(leaks._leaks), []  # handled here, not at teardown
    assert len(recorded) == 1 and "'TypeError'" in recorded[0]
