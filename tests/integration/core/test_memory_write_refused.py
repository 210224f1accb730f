"""A memory write refused at connect (the memory service's address has no process
listening, as while a rollout replaces its pod) is tried once more, and only then: the
write reaches the service that listens by then, once. An answer, even a 503, is never sent
again (the service may have done it). The client is the real one, over loopback; the
service is an aiohttp app that counts the writes it is sent."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiohttp import web
from kaos_core.memory.client import MemoryServiceClient

from tests.support.procs import free_port


def _service(writes: list[str], status: int) -> web.Application:
    async def write(request: web.Request) -> web.Response:
        writes.append(request.headers.get("X-Session-Id", ""))
        if status != 200:
            return web.json_response(
                {"error": {"code": "busy", "message": "busy"}, "request_id": "r"}, status=status
            )
        return web.json_response({"accepted": 2, "scheduled": False, "request_id": "r"})

    app = web.Application()
    app.router.add_post("/v1/write", write)
    return app


async def _serve(app: web.Application, port: int) -> web.AppRunner:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def test_a_write_refused_at_connect_is_sent_once_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    port, writes = free_port(), []
    caplog.set_level(logging.WARNING, logger="kaos_core.memory.client")
    async with MemoryServiceClient(
        f"http://127.0.0.1:{port}", agent_identity="kaos://agent/ns/a", failure_mode="strict"
    ) as client:
        sent = asyncio.ensure_future(
            client.write([("user", "hi"), ("assistant", "hello")], session_id="s1")
        )
        # The first try is refused (nothing listens yet); the service comes up before the
        # second.
        while not any("memory call failed" in r.message for r in caplog.records):
            assert not sent.done(), sent
            await asyncio.sleep(0.01)
        runner = await _serve(_service(writes, 200), port)
        try:
            answer = await sent
        finally:
            await runner.cleanup()
    assert answer.accepted == 2 and not answer.degraded
    assert writes == ["s1"]


async def test_an_answered_write_is_not_sent_again() -> None:
    port, writes = free_port(), []
    runner = await _serve(_service(writes, 503), port)
    try:
        async with MemoryServiceClient(
            f"http://127.0.0.1:{port}", agent_identity="kaos://agent/ns/a"
        ) as client:
            answer = await client.write([("user", "hi")], session_id="s2")
    finally:
        await runner.cleanup()
    assert answer.degraded  # soft mode: the failure is the answer's, not an exception
    assert writes == ["s2"]
