"""An OpenAI-compatible pass-through that records what a model is sent, and may answer
some requests itself: the real-model stack puts one between the agents and Ollama (where
LiteLLM would stand), and the knowledge-update bench's oracle judge is one that answers the
update decisions."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.support.localstack import LOOPBACK, StackError
from tests.support.procs import free_port

# A chat request's body -> the answer's body, or None to forward the request.
Answer = Callable[[dict[str, Any]], dict[str, Any] | None]


@dataclass
class Recorder:
    """An OpenAI-compatible pass-through to ``upstream`` that keeps each chat request's
    body (newest last), in a thread of its own so a synchronous caller can start it."""

    upstream: str
    port: int = field(default_factory=free_port)
    requests: list[dict[str, Any]] = field(default_factory=list)
    # (start, end) of each forwarded call, perf_counter seconds: the model's share of a turn.
    calls: list[tuple[float, float]] = field(default_factory=list)
    # Answers some chat requests itself instead of forwarding them (recorded, not timed).
    answer: Answer | None = None
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        doc = None
        if request.path.endswith("/chat/completions"):
            # A body that is not JSON is forwarded as is: the model answers what it makes of it.
            with contextlib.suppress(ValueError):
                doc = json.loads(body)
                self.requests.append(doc)
        if isinstance(doc, dict) and self.answer is not None:
            reply = self.answer(doc)
            if reply is not None:
                return web.json_response(reply)
        started = time.perf_counter()
        try:
            return await self._pass(request, body)
        finally:
            self.calls.append((started, time.perf_counter()))

    async def _pass(self, request: web.Request, body: bytes) -> web.StreamResponse:
        session: aiohttp.ClientSession = request.app["session"]
        headers = {k: v for k, v in request.headers.items() if k.lower() in _FORWARDED}
        try:
            return await self._relay(request, session, body, headers)
        except (aiohttp.ClientError, TimeoutError):
            # As LiteLLM answers when its backend fails; the caller's error path is tested.
            return web.json_response({"error": {"message": "upstream failed"}}, status=502)

    async def _relay(
        self,
        request: web.Request,
        session: aiohttp.ClientSession,
        body: bytes,
        headers: dict[str, str],
    ) -> web.StreamResponse:
        async with session.request(
            request.method, self.upstream + request.path_qs, data=body, headers=headers
        ) as upstream:
            resp = web.StreamResponse(status=upstream.status)
            if ctype := upstream.headers.get("Content-Type"):
                resp.content_type = ctype.split(";")[0]
            await resp.prepare(request)
            async for chunk in upstream.content.iter_any():
                await resp.write(chunk)
            await resp.write_eof()
            return resp

    def start(self) -> Recorder:
        ready = threading.Event()

        async def serve() -> None:
            app = web.Application(client_max_size=64 * 1024**2)
            app["session"] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600))
            app.router.add_route("*", "/{tail:.*}", self._forward)
            self._runner = web.AppRunner(app)
            await self._runner.setup()
            await web.TCPSite(self._runner, LOOPBACK, self.port).start()
            ready.set()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(serve())
            loop.run_forever()

        self._thread = threading.Thread(target=run, name="kaos-recorder", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise StackError("the recording pass-through did not start")
        return self

    def stop(self) -> None:
        loop, runner = self._loop, self._runner
        if loop is None or runner is None:
            return

        async def down() -> None:
            await runner.app["session"].close()
            await runner.cleanup()

        asyncio.run_coroutine_threadsafe(down(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(30)
        self._loop = None

    def last(self, prompt: str) -> dict[str, Any] | None:
        """The newest chat request whose last user message is ``prompt``."""
        for req in reversed(self.requests):
            users = [m for m in req.get("messages", []) if m.get("role") == "user"]
            if users and _text(users[-1].get("content")) == prompt:
                found: dict[str, Any] = req
                return found
        return None


_FORWARDED = {"content-type", "authorization", "accept"}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


@contextmanager
def recording(
    upstream: str, port: int | None = None, answer: Answer | None = None
) -> Iterator[Recorder]:
    """A started ``Recorder`` (on a free port unless ``port``) for the block."""
    rec = Recorder(upstream, free_port() if port is None else port, answer=answer).start()
    try:
        yield rec
    finally:
        rec.stop()
