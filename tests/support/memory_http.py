"""Small helpers shared by the memory service tests: raw HTTP calls and polling."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from multidict import CIMultiDict

from tests.fixtures.memory import MemoryServer
from tests.support.postgres import pg_query

T = TypeVar("T")

AGENT_A = "kaos://agent/team/alpha"
AGENT_B = "kaos://agent/team/beta"


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def headers(
    *, agent: str | None = None, principal: str | None = None, session: str | None = None
) -> dict[str, str]:
    out: dict[str, str] = {}
    if agent is not None:
        out["X-Agent-Identity"] = agent
    if principal is not None:
        out["X-Principal"] = principal
    if session is not None:
        out["X-Session-Id"] = session
    return out


async def call(
    url: str,
    path: str,
    body: Any = None,
    *,
    hdrs: dict[str, str] | None = None,
    raw: bytes | None = None,
    content_type: str = "application/json",
    method: str = "POST",
) -> tuple[int, Any, CIMultiDict[str]]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    all_headers = {"Content-Type": content_type, **(hdrs or {})}
    timeout = aiohttp.ClientTimeout(total=60)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.request(method, url + path, data=data, headers=all_headers) as resp,
    ):
        text = await resp.text()
        try:
            doc = json.loads(text)
        except ValueError:
            doc = text
        return resp.status, doc, CIMultiDict(resp.headers)


async def eventually(
    probe: Callable[[], Awaitable[T]],
    check: Callable[[T], bool],
    *,
    within: float = 60.0,
    what: str = "condition",
) -> T:
    """Poll ``probe`` until ``check`` holds; fail with the last value after ``within`` s."""
    deadline = time.monotonic() + within
    while True:
        value = await probe()
        if check(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {within}s; last: {value!r}")
        await asyncio.sleep(0.1)  # polling interval, not synchronisation


def wait_sync(check: Callable[[], T], *, timeout: float = 60.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached in {timeout}s; last: {value!r}")
        time.sleep(0.1)  # polling interval, not synchronisation


FILLER = (
    "the quick brown fox jumps over the lazy dog while the memory service keeps a "
    "window of recent turns and folds older ones into a digest "
)


def long_text(marker: str, chars: int = 460) -> str:
    """A turn long enough (about 120 tokens) that two of them cross a 200-token budget."""
    text = f"{marker} says: "
    while len(text) < chars:
        text += FILLER
    return text[:chars].strip()


async def seed_facts(
    url: str, ident: dict[str, str], markers: list[str], *, infer: bool = False
) -> list[str]:
    """Write one long user turn per marker to a 200-token-budget service (all get folded
    and extracted once there are two or more) and return the texts written."""
    texts = [long_text(m) for m in markers]
    for text in texts:
        status, doc, _ = await call(
            url,
            "/v1/write",
            {"turns": [{"role": "user", "content": text}], "infer": infer},
            hdrs=ident,
        )
        assert status in (200, 202), doc
    return texts


async def list_all(
    url: str, ident: dict[str, str], level: str, *, limit: int = 50
) -> list[dict[str, Any]]:
    """Every long-term fact of a level, following cursors."""
    facts: list[dict[str, Any]] = []
    cursor = None
    while True:
        body: dict[str, Any] = {"level": level, "include": ["long_term"], "limit": limit}
        if cursor is not None:
            body["cursor"] = cursor
        status, doc, _ = await call(url, "/v1/list", body, hdrs=ident)
        assert status == 200, doc
        assert doc["degraded"] is False, doc
        facts += doc["long_term"]["facts"]
        cursor = doc["next_cursor"]
        if cursor is None:
            return facts


def break_vector_store(server: MemoryServer) -> None:
    """Take the vector store's tables away underneath the running service."""
    if server.backend == "external":
        assert server.db.dsn is not None
        pg_query(server.db.dsn, f"DROP TABLE {server.db.collection}")
        return
    import sqlite3

    conn = sqlite3.connect(server.db.data_dir / "chroma" / "chroma.sqlite3", timeout=30)
    try:
        conn.execute("DROP TABLE embedding_metadata")
        conn.execute("DROP TABLE embeddings")
        conn.commit()
    finally:
        conn.close()


PENDING_WRITES = "kaos_agent_memory_writes_pending"


def writes_pending(metrics_text: str) -> float:
    """The agent's memory writes still on their way (its ``/metrics`` text)."""
    for line in metrics_text.splitlines():
        if line.startswith(PENDING_WRITES + " "):
            return float(line.split()[1])
    raise AssertionError(f"no {PENDING_WRITES} in the agent's metrics")


async def writes_settled(agent_url: str, *, within: float = 30.0) -> None:
    """Until the agent has no memory write in flight: an answered turn's write (sent after
    the answer under failureMode soft) has then been answered by the memory service."""

    async def probe() -> float:
        async with (
            aiohttp.ClientSession() as http,
            http.get(agent_url + "/metrics") as resp,
        ):
            return writes_pending(await resp.text())

    await eventually(probe, lambda n: n == 0, within=within, what="the agent's memory writes")


def writes_settled_sync(agent_url: str, *, within: float = 30.0) -> None:
    """``writes_settled`` for synchronous callers."""

    def settled() -> bool:
        with urllib.request.urlopen(agent_url + "/metrics", timeout=10) as resp:
            return writes_pending(resp.read().decode()) == 0

    wait_sync(settled, timeout=within, what="the agent's memory writes")
