"""Errors wrapped at the edge: a store failure is ``degraded``, a bug is a 500 with an id.

The service is built in this process by ``create_app(settings, deps=...)`` with the real
SQLite store over a dialect part that fails on cue (a driver error, or a programming
error such as a ``TypeError``), the real Mem0 store and the development model. No answer
may carry exception text or a class name, ``/readyz`` included.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from kaos_memory.app import create_app
from kaos_memory.deps import MemoryDeps, default_deps
from kaos_memory.settings import MemorySettings
from kaos_memory.storage.sql.sqlite import SqliteDialect
from kaos_memory.storage.sql.store import SqlConversationStore

from tests.support.devmodel import DevModel

# The statement of a window read: the part fails there, after the store started.
WINDOW_READ = "ORDER BY seq DESC"
SECRET = "secret-detail-/var/lib/x"
LEAKS = ("TypeError", "OperationalError", "Traceback", SECRET, "sqlite3")
HEADERS = {
    "X-Agent-Identity": "kaos://agent/team/a",
    "X-Principal": "alice",
    "X-Session-Id": "s1",
}


class FailingDialect(SqliteDialect):
    """SQLite, except that statements containing ``match`` raise ``error`` (a part)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.match: str | None = None
        self.error: Exception = TypeError(SECRET)

    def sql(self, text: str) -> str:
        if self.match is not None and self.match in text:
            raise self.error
        return super().sql(text)


@dataclass
class Service:
    client: TestClient[Any, Any]
    dialect: FailingDialect


@pytest.fixture
async def service(
    tmp_path: Path, devmodel: DevModel, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Service]:
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "data" / "mem0"))
    settings = MemorySettings(
        data_dir=tmp_path / "data",
        collection="kaos_errors",
        model_base_url=devmodel.base_url,
        summarization_model="dev-summarizer",
        embedding_model="dev-embedder",
        embedding_dims=64,
        max_read_scope="user",
    )
    dialect = FailingDialect(settings.backend.sqlite_path)
    parts = default_deps(settings)
    deps = MemoryDeps(
        conversation=SqlConversationStore(dialect),
        longterm=parts.longterm,
        summarizer=parts.summarizer,
    )
    client = TestClient(TestServer(create_app(settings, deps=deps)))
    await client.start_server()
    try:
        yield Service(client, dialect)
    finally:
        await client.close()


def assert_no_leak(text: str) -> None:
    for word in LEAKS:
        assert word not in text, f"{word!r} reached a client: {text}"


async def recall(service: Service) -> tuple[int, str, dict[str, object]]:
    """A window read of a session alice wrote to (so the read reaches the window)."""
    resp = await service.client.post(
        "/v1/write", json={"turns": [{"role": "user", "content": "hi"}]}, headers=HEADERS
    )
    assert resp.status in (200, 202), await resp.text()
    resp = await service.client.post(
        "/v1/recall",
        json={"level": "session", "query": "x", "include": ["short_term"]},
        headers=HEADERS,
    )
    text = await resp.text()
    return resp.status, text, await resp.json()


async def failing_recall(service: Service) -> tuple[int, str, dict[str, object]]:
    await recall(service)
    service.dialect.match = WINDOW_READ
    return await recall(service)


async def test_a_programming_error_in_a_store_is_a_500_with_a_request_id(
    service: Service,
) -> None:
    service.dialect.error = TypeError(SECRET)
    status, text, doc = await failing_recall(service)
    assert status == 500, doc
    assert "degraded" not in doc, "a bug is not a degraded answer"
    assert doc["error"] == {"code": "internal_error", "message": "internal error"}
    assert isinstance(doc["request_id"], str) and doc["request_id"]
    assert_no_leak(text)


async def test_a_store_failure_is_still_a_degraded_answer(service: Service) -> None:
    service.dialect.error = sqlite3.OperationalError(f"disk I/O error {SECRET}")
    status, text, doc = await failing_recall(service)
    assert status == 200 and doc["degraded"] is True, doc
    assert_no_leak(text)


async def test_a_strict_write_names_the_failed_tier_only(service: Service) -> None:
    service.dialect.match = "INSERT INTO kaos_mem_turns"
    service.dialect.error = sqlite3.OperationalError(f"database is locked {SECRET}")
    resp = await service.client.post(
        "/v1/write",
        json={"turns": [{"role": "user", "content": "hi"}], "failure_mode": "strict"},
        headers=HEADERS,
    )
    doc = await resp.json()
    assert resp.status == 500 and doc["error"]["code"] == "strict_failure", doc
    assert doc["error"]["message"] == "the conversation store failed"
    assert_no_leak(await resp.text())


async def test_readyz_says_which_store_is_down_and_nothing_more(service: Service) -> None:
    resp = await service.client.get("/readyz")
    assert resp.status == 200, await resp.text()
    service.dialect.match = "SELECT 1"
    service.dialect.error = sqlite3.OperationalError(f"unable to open {SECRET}")
    resp = await service.client.get("/readyz")
    text = await resp.text()
    assert resp.status == 503, text
    assert (await resp.json())["checks"] == {
        "conversation_store": "unavailable",
        "vector_store": "ok",
    }
    assert_no_leak(text)
