"""A judge that knows the answers: the knowledge-update bench's ceiling for KAOS's machinery.

The memory service retires a fact when its summarisation model, shown a new fact beside
the owner's nearest current facts, says the new one replaces it. How often the current
value then comes first depends on two things: that judgement, and everything around it
(which facts the model is shown, how a retirement is applied, what recall returns). The
development model's judgement is a fixed script and SmolLM2-135M's is weak, so neither
says what the machinery gives a capable model. This judge answers the supersession prompt
from the bench's own cases: a new fact holding a case's new value retires an existing
fact shown beside it that holds the old value and not the new. Every other request goes
to the chat model unchanged. What it cannot fix is what the machinery loses: an
old fact that is not among the new one's nearest is never shown to any judge.

It serves on a loopback port from a thread of the bench's process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence

import aiohttp
from aiohttp import web
from kaos_devmodel.supersede import SUPERSEDE_MARKER, shown

from tests.support.procs import free_port


def word(value: str) -> re.Pattern[str]:
    """``value`` as a whole word, ignoring case: how the bench matches values in facts."""
    return re.compile(rf"(?<!\w){re.escape(value)}(?!\w)", re.IGNORECASE)


def answer(prompt: str, changes: Sequence[tuple[str, str]]) -> str:
    """The supersession answer for ``prompt`` given the (old, new) values that changed."""
    pairs = [(word(old), word(new)) for old, new in changes]
    retire = [
        {"existing": existing, "by": label}
        for label, text, existing, shown_text in shown(prompt)
        if any(
            new.search(text) and old.search(shown_text) and not new.search(shown_text)
            for old, new in pairs
        )
    ]
    return json.dumps({"retire": retire})


def _completion(content: str, model: str) -> dict[str, object]:
    return {
        "id": "chatcmpl-oracle",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def _app(upstream: str, changes: Sequence[tuple[str, str]]) -> web.Application:
    session: web.AppKey[aiohttp.ClientSession] = web.AppKey("session", aiohttp.ClientSession)

    async def client(app: web.Application) -> AsyncIterator[None]:
        app[session] = aiohttp.ClientSession()
        yield
        await app[session].close()

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        doc = json.loads(body)
        messages = doc.get("messages") or []
        first = messages[0].get("content") if messages else None
        if isinstance(first, str) and first.startswith(SUPERSEDE_MARKER):
            content = answer(str(messages[-1].get("content") or ""), changes)
            return web.json_response(_completion(content, str(doc.get("model") or "oracle")))
        headers = {"Content-Type": "application/json"}
        async with request.app[session].post(
            f"{upstream}/chat/completions", data=body, headers=headers
        ) as resp:
            return web.Response(
                body=await resp.read(), status=resp.status, content_type=resp.content_type
            )

    app = web.Application()
    app.cleanup_ctx.append(client)
    app.router.add_post("/v1/chat/completions", chat)
    return app


@contextlib.contextmanager
def oracle(upstream: str, changes: Sequence[tuple[str, str]]) -> Iterator[str]:
    """The judge's ``/v1`` base URL, in front of the chat model at ``upstream`` (a ``/v1``
    base URL), for as long as the block runs."""
    loop = asyncio.new_event_loop()
    port = free_port()
    runner = web.AppRunner(_app(upstream, changes))
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, name="oracle-judge", daemon=True)
    thread.start()
    if not started.wait(timeout=30):
        raise RuntimeError("the oracle judge did not start")
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
