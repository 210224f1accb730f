"""Export and import over HTTP, as the CLI speaks them, and what the tests compare."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import aiohttp

from tests.fixtures.memory import MemoryServer
from tests.support.memory_http import call, headers, long_text

NDJSON = "application/x-ndjson"


async def export(
    server: MemoryServer, scope: dict[str, Any], *, hdrs: dict[str, str] | None = None
) -> tuple[int, bytes]:
    timeout = aiohttp.ClientTimeout(total=120)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.post(server.url + "/v1/export", json=scope, headers=hdrs or {}) as resp,
    ):
        return resp.status, await resp.read()


async def import_(
    server: MemoryServer, body: bytes, *, query: str = "", content_type: str = NDJSON
) -> tuple[int, Any]:
    status, doc, _ = await call(
        server.url, "/v1/import" + query, raw=body, content_type=content_type
    )
    return status, doc


def lines(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def counts(server: MemoryServer) -> dict[str, int]:
    """Rows of every table an import writes, and the facts of the vector store."""
    tables = ("turns", "digests", "folds", "attribution", "sessions")
    out = {t: int(server.db.relational(f"SELECT COUNT(*) FROM kaos_mem_{t}")[0][0]) for t in tables}
    # The store's own collection (the fixture's reader names the default one).
    collection = server.env["KAOS_MEMORY_COLLECTION"]
    out["facts"] = len(dataclasses.replace(server.db, collection=collection).vector_payloads())
    return out


async def recall(server: MemoryServer, principal: str, session: str, query: str) -> Any:
    """An admin's recall of a principal's facts and a session's window and digest."""
    status, doc, _ = await call(
        server.url,
        "/v1/recall",
        {"level": "user", "query": long_text(query), "top_k": 20},
        hdrs=headers(principal=principal, session=session),
    )
    assert status == 200 and doc["degraded"] is False, doc
    return {
        "facts": [
            (f["text"], f["user_id"], f["agent_id"], f["session_id"], f["provenance"])
            for f in doc["long_term"]["facts"]
        ],
        "digest": (doc["medium_term"]["version"], doc["medium_term"]["summary"]),
        "window": [(t["role"], t["content"], t["at"]) for t in doc["short_term"]["window"]],
    }
