"""``MemoryServiceClient`` failure semantics: recall never raises, writes raise only strict."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from kaos_core.memory.client import MemoryServiceClient, MemoryUnavailable

from tests.fixtures.memory import MakeMemory
from tests.support.memory_http import AGENT_A, break_vector_store, uid
from tests.support.procs import free_port


@pytest.fixture
async def silent_server() -> AsyncIterator[str]:
    """A TCP server that accepts and never answers: a hung memory service."""
    held: list[asyncio.StreamWriter] = []

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("kind", ["refused", "hung"])
async def test_transport_failures(kind: str, silent_server: str) -> None:
    url = f"http://127.0.0.1:{free_port()}" if kind == "refused" else silent_server
    async with MemoryServiceClient(url, agent_identity=AGENT_A, timeout=0.5) as client:
        recalled = await client.recall("session", "q", session_id="s")
        assert recalled.degraded and recalled.short_term.window == []
        listed = await client.list("session", session_id="s")
        assert listed.degraded
        written = await client.write([("user", "x")], session_id="s")
        assert written.degraded and written.accepted == 0
        forgot = await client.forget("session", session_id="s")
        assert forgot.degraded
        with pytest.raises(MemoryUnavailable):
            await client.write([("user", "x")], session_id="s", failure_mode="strict")
        with pytest.raises(MemoryUnavailable):
            await client.forget("session", session_id="s", failure_mode="strict")
        assert await client.ready() is False


async def test_strict_500_raises_and_soft_degrades(memory_factory: MakeMemory) -> None:
    server = memory_factory("local")
    # A broken long-term tier is what makes a strict write fail.
    break_vector_store(server)
    session = uid("s")
    async with server.client(agent=AGENT_A, timeout=10) as client:
        with pytest.raises(MemoryUnavailable, match="strict_failure"):
            await client.write([("user", "x")], session_id=session, failure_mode="strict")
        soft = await client.write([("user", "x")], session_id=session)
        assert soft.accepted == 1 and not soft.degraded
        recalled = await client.recall("session", "x", session_id=session)
        assert [t.content for t in recalled.short_term.window] == ["x"]
