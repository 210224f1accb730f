"""The memory service built in this process (``create_app`` with the service's own parts)
on real stores, local (SQLite and Chroma) and external (PostgreSQL and pgvector), on a
``FakeClock`` the tests move; its sweeper runs when a test says so."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from kaos_memory.app import create_app
from kaos_memory.deps import default_deps
from kaos_memory.keys import SWEEPER_KEY

from tests.support.clock import FakeClock
from tests.support.devmodel import DevModel
from tests.support.memory import MemoryDb, consolidation_stores

# Small windows (two long turns fold), no idle flush, and no sweep but the tests' own.
BASE: dict[str, Any] = {
    "token_budget": 200,
    "idle_flush_seconds": 0,
    "sweep_interval": 3600,
    "max_read_scope": "user",
}


@dataclass
class Memory:
    client: TestClient[Any, Any]
    app: web.Application
    clock: FakeClock
    db: MemoryDb

    async def post(
        self, path: str, body: dict[str, Any], hdrs: dict[str, str]
    ) -> tuple[int, Any, Any]:
        resp = await self.client.post(path, json=body, headers=hdrs)
        return resp.status, await resp.json(), resp.headers

    async def write(self, hdrs: dict[str, str], *texts: str) -> tuple[int, Any, Any]:
        turns = [{"role": "user", "content": t} for t in texts]
        return await self.post("/v1/write", {"turns": turns, "infer": False}, hdrs)

    async def sweep(self) -> None:
        await self.app[SWEEPER_KEY].sweep()

    async def metric(self, name: str, **labels: str) -> float:
        """One sample of the service's ``/metrics`` (0 when it has none yet)."""
        text = await (await self.client.get("/metrics")).text()
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        pattern = rf"^{re.escape(name)}(?:\{{{re.escape(wanted)}\}})? (\S+)$"
        found = re.search(pattern, text, re.MULTILINE)
        return float(found.group(1)) if found else 0.0

    async def audit(self) -> list[dict[str, Any]]:
        resp = await self.client.get("/v1/audit")
        assert resp.status == 200, await resp.text()
        records: list[dict[str, Any]] = (await resp.json())["records"]
        return records


MakeMemory = Callable[..., Awaitable[Memory]]


@pytest.fixture(params=["local", pytest.param("external", marks=pytest.mark.postgres)])
async def make_memory(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    devmodel: DevModel,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[MakeMemory]:
    clients: list[TestClient[Any, Any]] = []

    async def make(**settings: Any) -> Memory:
        memory_settings, db = consolidation_stores(
            request,
            monkeypatch,
            tmp_path / "data",
            devmodel.base_url,
            "kaos_retention",
            **{**BASE, **settings},
        )
        # Mem0 stamps a fact with the wall clock: the service's clock starts there.
        clock = FakeClock(time.time())
        app = create_app(memory_settings, deps=default_deps(memory_settings, clock))
        client: TestClient[Any, Any] = TestClient(TestServer(app))
        await client.start_server()
        clients.append(client)
        return Memory(client, app, clock, db)

    try:
        yield make
    finally:
        for client in clients:
            await client.close()
