"""An aiohttp application served on a free loopback port inside a test."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web


@asynccontextmanager
async def served(app: web.Application) -> AsyncIterator[int]:
    """Serve ``app`` on 127.0.0.1 (a port the system picks) until the block ends; the port."""
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()
