"""The key documents a verifier fetches, over real HTTP on loopback: an answer past the
size cap is refused before it is held (with and without a length header), a normal one
is read, and the verifier keeps answering 503 rather than growing."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kaos_core.auth.verify import (
    MAX_DOCUMENT_BYTES,
    HttpsSource,
    VerifierUnavailable,
    discovery_source,
)

ISSUER = "https://issuer.example.test"
HUGE = b'{"keys": [' + b'{"kty": "RSA"},' * (MAX_DOCUMENT_BYTES // 10) + b"{}]}"


async def _sized(request: web.Request) -> web.Response:
    return web.Response(body=HUGE, content_type="application/json")


async def _chunked(request: web.Request) -> web.StreamResponse:
    # No Content-Length: the cap is applied while the body arrives.
    resp = web.StreamResponse()
    resp.content_type = "application/json"
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    for start in range(0, len(HUGE), 64 * 1024):
        await resp.write(HUGE[start : start + 64 * 1024])
    await resp.write_eof()
    return resp


async def _small(request: web.Request) -> web.Response:
    return web.json_response({"keys": []})


@pytest.fixture
async def issuer() -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_get("/sized", _sized)
    app.router.add_get("/chunked", _chunked)
    app.router.add_get("/small", _small)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()


@pytest.mark.parametrize("path", ["/sized", "/chunked"])
async def test_an_oversize_key_document_is_refused(issuer: str, path: str) -> None:
    assert len(HUGE) > MAX_DOCUMENT_BYTES
    http = HttpsSource(ca_file=None, token_file=None)
    try:
        with pytest.raises(VerifierUnavailable, match=f"more than {MAX_DOCUMENT_BYTES} bytes"):
            await discovery_source(http, ISSUER, issuer + path)()
        # A document within the cap is read as before.
        assert await discovery_source(http, ISSUER, issuer + "/small")() == {"keys": []}
    finally:
        await http.close()
