"""Hostile bytes at the memory service's edge, on both storage backends.

Each example is one mutated request (``tests.support.hostile``) sent over a raw socket to
a real ``kaos-memory``: it must be answered within the deadline (a body shorter than its
Content-Length within ``KAOS_HTTP_BODY_TIMEOUT``), never with a 5xx, with a JSON error in
the contract's shape that names no Python exception; a request the generator marked
hostile must be refused with a 4xx; and a refused request must leave every table the
service writes (turns, sessions, attribution, folds, digests, Mem0's collection) as it
was. After the run the service still answers its probes and serves a valid write and
recall.

The service runs with a token budget no example reaches and the idle flush off, so no
background fold changes the tables while an example is checked.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import aiohttp
import pytest
from hypothesis import example, given

from tests.fixtures.memory import MemoryServer, memory_env
from tests.support.hostile import (
    SERVICE_ENV,
    SESSION_PLACEHOLDER,
    Endpoint,
    Path,
    RawRequest,
    fuzz_settings,
    hostile_requests,
    issue_cases,
    run_one,
)
from tests.support.memory import MemoryDb
from tests.support.memory_http import call, uid
from tests.support.postgres import create_database, drop_database, unique_name
from tests.support.procs import ServiceProcess, console_script, free_port, start_service

COLLECTION = "kaos_memory_fuzz"
AGENT = "kaos://agent/fuzz/alpha"
PRINCIPAL = "fuzz-principal"
IDENTITY = ("X-Agent-Identity", "X-Principal", "X-Session-Id")
HEADERS = (
    ("Content-Type", "application/json"),
    ("X-Agent-Identity", AGENT),
    ("X-Principal", PRINCIPAL),
    ("X-Session-Id", SESSION_PLACEHOLDER),
)
# No example writes anywhere near this many tokens, and no session is flushed for being
# idle: nothing runs in the background while an example's tables are compared.
SETTINGS = {"token_budget": 10_000_000, "idle_flush_seconds": 0, "max_read_scope": "user"}
TABLES = (
    "kaos_mem_turns",
    "kaos_mem_sessions",
    "kaos_mem_attribution",
    "kaos_mem_folds",
    "kaos_mem_digests",
)


def _endpoint(name: str, body: dict[str, object], *deep_paths: Path) -> Endpoint:
    return Endpoint(
        name=f"memory {name}",
        method="POST",
        path=f"/v1/{name}",
        body=body,
        headers=HEADERS,
        forbids_unknown_fields=True,  # strict wire models, identity never in a body
        identity_headers=IDENTITY,
        nullable=(("top_k",), ("cursor",), ("failure_mode",)),
        deep_paths=deep_paths,
    )


ENDPOINTS = [
    _endpoint(
        "write",
        {"turns": [{"role": "user", "content": "fuzz turn text"}], "infer": False},
        ("turns", 0, "content"),
    ),
    _endpoint(
        "recall",
        {"level": "session", "query": "fuzz turn", "top_k": 3, "include": ["short_term"]},
    ),
    _endpoint("list", {"level": "session", "include": ["short_term"], "limit": 5}),
    _endpoint("forget", {"level": "session"}),
]
ISSUE_CASES = issue_cases(ENDPOINTS)


@pytest.fixture(
    scope="module", params=["local", pytest.param("external", marks=pytest.mark.postgres)]
)
def memory(
    request: pytest.FixtureRequest,
    devmodel_server: ServiceProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[MemoryServer]:
    backend = str(request.param)
    admin = name = dsn = None
    if backend == "external":
        admin = request.getfixturevalue("pg_admin_dsn")
        name = unique_name()
        dsn = create_database(admin, name, template=request.getfixturevalue("pg_template_db"))
    root = tmp_path_factory.mktemp(f"memory-fuzz-{backend}")
    port = free_port()
    env = memory_env(
        backend=backend,
        data_dir=root / "data",
        dsn=dsn,
        model_base_url=f"{devmodel_server.url}/v1",
        port=port,
        overrides=SETTINGS,
    )
    env["KAOS_MEMORY_COLLECTION"] = COLLECTION
    env.update(SERVICE_ENV)
    proc = start_service(
        f"memory-fuzz-{backend}",
        [console_script("kaos-memory")],
        port=port,
        env=env,
        log_dir=root,
        timeout=120,
    )
    db = MemoryDb(backend=backend, data_dir=root / "data", dsn=dsn, collection=COLLECTION)
    server = MemoryServer(backend=backend, proc=proc, db=db, env=env)
    try:
        yield server
    finally:
        proc.kill()
        if admin is not None and name is not None:
            drop_database(admin, name)


def stored(db: MemoryDb) -> tuple[int, ...]:
    """How many rows each table the service writes holds, Mem0's collection last."""
    query = "SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {t})" for t in TABLES)
    rows = db.relational(query)
    counts = tuple(int(c) for c in rows[0]) if rows else (0,) * len(TABLES)
    return (*counts, len(db.vector_payloads()))


async def assert_healthy(server: MemoryServer) -> None:
    assert server.proc.alive(), server.proc.log_tail()
    async with aiohttp.ClientSession() as http:
        for probe in ("/healthz", "/readyz"):
            async with http.get(server.url + probe) as resp:
                assert resp.status == 200, (probe, await resp.text())
    ident = {"X-Agent-Identity": AGENT, "X-Principal": PRINCIPAL, "X-Session-Id": uid("after")}
    text = "still serving after the fuzz run"
    before = stored(server.db)
    status, doc, _ = await call(
        server.url,
        "/v1/write",
        {"turns": [{"role": "user", "content": text}], "infer": False},
        hdrs=ident,
    )
    assert status in (200, 202) and doc["accepted"] == 1, doc
    # The row counts the examples compare do see a write (the property is not vacuous).
    assert stored(server.db)[0] == before[0] + 1, (before, stored(server.db))
    status, doc, _ = await call(
        server.url,
        "/v1/recall",
        {"level": "session", "query": text, "include": ["short_term"]},
        hdrs=ident,
    )
    assert status == 200, doc
    assert [t["content"] for t in doc["short_term"]["window"]] == [text]


def test_hostile_requests_are_refused_cleanly(memory: MemoryServer) -> None:
    sessions = itertools.count()

    @fuzz_settings(60)
    @given(req=hostile_requests(ENDPOINTS))
    def one(req: RawRequest) -> None:
        asyncio.run(
            run_one(
                memory.proc.port,
                req,
                session=f"fuzz-{next(sessions)}",
                snapshot=lambda: stored(memory.db),
            )
        )

    for case in ISSUE_CASES:
        one = example(req=case)(one)
    one()
    asyncio.run(assert_healthy(memory))
