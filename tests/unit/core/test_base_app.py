"""The shared base app: request ids, JSON errors, health, readiness and metrics over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from kaos_core.errors import Forbidden
from kaos_core.http import READINESS_KEY, create_base_app, json_response, read_model
from kaos_core.http.limits import HttpLimits
from kaos_core.telemetry.settings import TelemetrySettings
from pydantic import BaseModel, ConfigDict

from tests.support.loopback import served


class Echo(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    n: int


async def _echo(request: web.Request) -> web.Response:
    body = await read_model(request, Echo)
    return json_response(body)


async def _deny(request: web.Request) -> web.Response:
    raise Forbidden("not yours")


async def _boom(request: web.Request) -> web.Response:
    raise RuntimeError("secret internals")


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, web.Application]]:
    app = create_base_app(
        "demo", limits=HttpLimits(), telemetry=TelemetrySettings(), max_body_bytes=64
    )
    app.router.add_post("/echo", _echo)
    app.router.add_get("/deny", _deny)
    app.router.add_get("/boom", _boom)
    async with served(app) as port:
        yield f"http://127.0.0.1:{port}", app


async def _call(method: str, url: str, **kw: object) -> tuple[int, dict[str, object], str]:
    async with aiohttp.ClientSession() as s, s.request(method, url, **kw) as r:  # type: ignore[arg-type]
        return r.status, await r.json(content_type=None), r.headers.get("X-Request-Id", "")


async def test_valid_body_round_trips_with_a_generated_request_id(
    server: tuple[str, web.Application],
) -> None:
    status, body, rid = await _call("POST", server[0] + "/echo", json={"n": 3})
    assert (status, body) == (200, {"n": 3})
    assert len(rid) == 32


async def test_supplied_request_id_is_echoed_and_hostile_one_replaced(
    server: tuple[str, web.Application],
) -> None:
    _, _, rid = await _call("GET", server[0] + "/healthz", headers={"X-Request-Id": "abc-1"})
    assert rid == "abc-1"
    _, _, rid = await _call("GET", server[0] + "/healthz", headers={"X-Request-Id": "a b\tc"})
    assert rid != "a b\tc" and len(rid) == 32


@pytest.mark.parametrize(
    ("kw", "status", "code"),
    [
        (
            {"data": b"{not json", "headers": {"Content-Type": "application/json"}},
            400,
            "malformed_json",
        ),
        ({"json": [1, 2]}, 400, "malformed_json"),
        ({"json": {"n": "3"}}, 400, "invalid_body"),
        ({"json": {"n": 3, "extra": 1}}, 400, "invalid_body"),
        (
            {"data": b"n=3", "headers": {"Content-Type": "text/plain"}},
            415,
            "unsupported_media_type",
        ),
        ({"json": {"n": 1, "pad": "x" * 100}}, 413, "payload_too_large"),
    ],
)
async def test_bad_bodies_get_the_json_error_shape(
    server: tuple[str, web.Application], kw: dict[str, object], status: int, code: str
) -> None:
    got, body, rid = await _call("POST", server[0] + "/echo", **kw)
    assert got == status
    assert body["error"]["code"] == code  # type: ignore[index]
    assert body["request_id"] == rid


async def test_routing_errors_and_domain_errors_are_json(
    server: tuple[str, web.Application],
) -> None:
    url = server[0]
    assert (await _call("GET", url + "/nope"))[1]["error"]["code"] == "not_found"  # type: ignore[index]
    status, body, _ = await _call("GET", url + "/echo")
    assert status == 405 and body["error"]["code"] == "method_not_allowed"  # type: ignore[index]
    status, body, _ = await _call("GET", url + "/deny")
    assert status == 403 and body["error"] == {"code": "forbidden", "message": "not yours"}


async def test_unexpected_errors_do_not_leak_details(server: tuple[str, web.Application]) -> None:
    status, body, _ = await _call("GET", server[0] + "/boom")
    assert status == 500
    assert "secret" not in str(body)


async def test_readiness_follows_its_checks(server: tuple[str, web.Application]) -> None:
    url, app = server
    healthy = {"ok": True}

    async def check() -> None:
        if not healthy["ok"]:
            raise ConnectionError("down")

    app[READINESS_KEY].add("store", check)
    assert (await _call("GET", url + "/readyz"))[0] == 200
    healthy["ok"] = False
    status, body, _ = await _call("GET", url + "/readyz")
    assert status == 503 and body["checks"] == {"store": "unavailable"}, "no exception names"


async def test_metrics_count_requests_by_route_and_status(
    server: tuple[str, web.Application],
) -> None:
    url = server[0]
    await _call("POST", url + "/echo", json={"n": 1})
    await _call("POST", url + "/echo", json={"n": "x"})
    async with aiohttp.ClientSession() as s, s.get(url + "/metrics") as r:
        text = await r.text()
    assert 'demo_http_requests_total{method="POST",route="/echo",status="200"} 1.0' in text
    assert 'demo_http_requests_total{method="POST",route="/echo",status="400"} 1.0' in text
