"""The memory HTTP contract v1 against the real service over loopback, on both backends."""

from __future__ import annotations

import pytest
from kaos_core.memory.client import MemoryRequestRejected

from tests.fixtures.memory import MakeMemory, MemoryServer
from tests.support.memory_http import (
    AGENT_A,
    AGENT_B,
    call,
    eventually,
    headers,
    list_all,
    seed_facts,
    uid,
    wait_sync,
)


def error_code(doc: object) -> str:
    assert isinstance(doc, dict) and isinstance(doc.get("error"), dict), doc
    assert isinstance(doc.get("request_id"), str) and doc["request_id"], doc
    return str(doc["error"]["code"])


async def test_write_then_recall_the_window(memory_service: MemoryServer) -> None:
    session, principal = uid("s"), uid("p")
    async with memory_service.client(agent=AGENT_A) as client:
        written = await client.write(
            [("user", "hello there"), ("assistant", "hi, how can I help?")],
            session_id=session,
            principal=principal,
        )
        assert (written.accepted, written.scheduled, written.degraded) == (2, False, False)
        got = await client.recall("session", "hello", session_id=session, principal=principal)
    assert [(t.role, t.content) for t in got.short_term.window] == [
        ("user", "hello there"),
        ("assistant", "hi, how can I help?"),
    ]
    assert all(t.at for t in got.short_term.window)
    assert got.medium_term.summary is None
    assert got.degraded is False


@pytest.mark.parametrize(
    "body",
    [
        {"turns": [{"role": "user", "content": "x"}], "user_id": "mallory"},
        {"turns": [{"role": "user", "content": "x", "session_id": "other"}]},
        {"turns": [{"role": "user", "content": "x"}], "scope": "store"},
        {"turns": [{"role": "user", "content": "x"}], "attribution": {}},
        {"turns": [{"role": "user", "content": "x"}], "agent_id": AGENT_B},
        {"turns": [{"role": "user", "content": "x"}], "principal": "root"},
    ],
)
async def test_identity_in_body_is_rejected_and_nothing_written(
    memory_service: MemoryServer, body: dict[str, object]
) -> None:
    session = uid("s")
    status, doc, _ = await call(
        memory_service.url, "/v1/write", body, hdrs=headers(session=session)
    )
    assert status == 400
    assert error_code(doc) == "identity_in_body"
    assert not [t for t in memory_service.db.turns() if t["key"].endswith(f"|run:{session}")]


@pytest.mark.parametrize("path", ["/v1/recall", "/v1/list", "/v1/forget"])
async def test_identity_in_read_bodies_is_rejected(memory_service: MemoryServer, path: str) -> None:
    body = {"level": "session", "run_id": "x"}
    if path == "/v1/recall":
        body["query"] = "q"
    status, doc, _ = await call(memory_service.url, path, body, hdrs=headers(session="s"))
    assert status == 400 and error_code(doc) == "identity_in_body"


@pytest.mark.parametrize(
    "hdrs",
    [
        {"X-Agent-Identity": "helper", "X-Session-Id": "s"},
        {"X-Agent-Identity": "kaos://agent/NS/x", "X-Session-Id": "s"},
        {"X-Agent-Identity": "kaos://agent/ns/*", "X-Session-Id": "s"},
        {"X-Principal": "*", "X-Session-Id": "s"},
        {"X-Principal": " ", "X-Session-Id": "s"},
        {"X-Principal": "a" * 257, "X-Session-Id": "s"},
        {"X-Principal": "a\tb", "X-Session-Id": "s"},
        {"X-Session-Id": "*"},
        {"X-Session-Id": ""},
    ],
)
async def test_malformed_identity_headers(
    memory_service: MemoryServer, hdrs: dict[str, str]
) -> None:
    body = {"turns": [{"role": "user", "content": "x"}]}
    try:
        status, doc, _ = await call(memory_service.url, "/v1/write", body, hdrs=hdrs)
    except ValueError:
        pytest.skip("the HTTP client refuses to send this header value")
    assert status == 400
    assert error_code(doc) == "bad_identity_header"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/write", {"turns": [{"role": "user", "content": "x"}], "extra": 1}),
        ("/v1/write", {"turns": [{"role": "user", "content": "x", "name": "n"}]}),
        ("/v1/write", {"turns": [{"role": "user", "content": "x"}], "infer": "yes"}),
        ("/v1/write", {"turns": [{"role": "wizard", "content": "x"}]}),
        ("/v1/write", {"turns": []}),
        ("/v1/write", {"turns": [{"role": "user", "content": 5}]}),
        ("/v1/write", {"turns": [{"role": "user", "content": "x"}], "failure_mode": "loud"}),
        ("/v1/recall", {"level": "session", "query": "q", "top_k": "5"}),
        ("/v1/recall", {"level": "galaxy", "query": "q"}),
        ("/v1/recall", {"level": "session"}),
        ("/v1/recall", {"level": "session", "query": "q", "include": ["short_term"] * 2}),
        ("/v1/list", {"level": "session", "limit": 0}),
        ("/v1/list", {"level": "session", "cursor": "not-a-cursor"}),
        ("/v1/forget", {"level": "session", "failure_mode": 1}),
    ],
)
async def test_invalid_bodies_are_bad_requests(
    memory_service: MemoryServer, path: str, body: dict[str, object]
) -> None:
    status, doc, _ = await call(
        memory_service.url, path, body, hdrs=headers(session=uid("s"), principal="p")
    )
    assert status == 400, doc
    error_code(doc)


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe", b""])
async def test_malformed_json(memory_service: MemoryServer, raw: bytes) -> None:
    status, doc, _ = await call(memory_service.url, "/v1/write", raw=raw, hdrs=headers(session="s"))
    assert status == 400
    assert error_code(doc) == "malformed_json"


async def test_body_over_the_limit_is_413(memory_service: MemoryServer) -> None:
    session = uid("s")
    big = b'{"turns": [{"role": "user", "content": "' + b"a" * (1024 * 1024 + 10) + b'"}]}'
    status, doc, _ = await call(
        memory_service.url, "/v1/write", raw=big, hdrs=headers(session=session)
    )
    assert status == 413
    assert error_code(doc) == "payload_too_large"
    assert not [t for t in memory_service.db.turns() if t["key"].endswith(f"|run:{session}")]


async def test_non_json_content_type_is_415(memory_service: MemoryServer) -> None:
    status, doc, _ = await call(
        memory_service.url,
        "/v1/write",
        raw=b'{"turns": [{"role": "user", "content": "x"}]}',
        content_type="text/plain",
        hdrs=headers(session="s"),
    )
    assert status == 415
    assert error_code(doc) == "unsupported_media_type"


@pytest.mark.parametrize("path", ["/v1/recall", "/v1/list", "/v1/forget"])
async def test_store_level_is_403_with_an_agent_header(
    memory_service: MemoryServer, path: str
) -> None:
    body: dict[str, object] = {"level": "store"}
    if path == "/v1/recall":
        body["query"] = "anything"
    status, doc, _ = await call(memory_service.url, path, body, hdrs=headers(agent=AGENT_A))
    assert status == 403
    assert error_code(doc) == "store_level_forbidden"


@pytest.mark.parametrize(
    ("level", "hdrs", "include"),
    [
        ("session", headers(agent=AGENT_A, principal="p"), ["long_term"]),
        ("agent", headers(principal="p", session="s"), ["long_term"]),
        ("user", headers(agent=AGENT_A, session="s"), ["long_term"]),
        ("agent", headers(agent=AGENT_A), ["short_term"]),
        ("user", headers(principal="p"), ["medium_term", "long_term"]),
    ],
)
async def test_unresolvable_scope_is_400(
    memory_service: MemoryServer, level: str, hdrs: dict[str, str], include: list[str]
) -> None:
    for path, body in (
        ("/v1/recall", {"level": level, "query": "q", "include": include}),
        ("/v1/list", {"level": level, "include": include}),
    ):
        status, doc, _ = await call(memory_service.url, path, body, hdrs=hdrs)
        assert status == 400, (path, doc)
        error_code(doc)


async def test_write_without_session_is_400(memory_service: MemoryServer) -> None:
    status, doc, _ = await call(
        memory_service.url,
        "/v1/write",
        {"turns": [{"role": "user", "content": "x"}]},
        hdrs=headers(agent=AGENT_A, principal="p"),
    )
    assert status == 400 and error_code(doc) == "missing_session"


async def test_unknown_path_and_wrong_method(memory_service: MemoryServer) -> None:
    status, doc, _ = await call(memory_service.url, "/v1/nothing", {})
    assert status == 404 and error_code(doc) == "not_found"
    status, doc, hdrs = await call(memory_service.url, "/v1/write", method="GET")
    assert status == 405 and error_code(doc) == "method_not_allowed"
    assert "POST" in hdrs.get("Allow", "")


async def test_request_id_is_echoed(memory_service: MemoryServer) -> None:
    status, doc, hdrs = await call(
        memory_service.url,
        "/v1/recall",
        {"level": "store", "query": "q"},
        hdrs={"X-Request-Id": "trace-123", **headers(agent=AGENT_A)},
    )
    assert status == 403
    assert hdrs["X-Request-Id"] == "trace-123" == doc["request_id"]


async def test_typed_client_raises_rejections(memory_service: MemoryServer) -> None:
    async with memory_service.client(agent=AGENT_A) as client:
        with pytest.raises(MemoryRequestRejected) as err:
            await client.list("store")
    assert err.value.status == 403


async def test_principal_bound_session_read_checks_attribution(
    memory_service: MemoryServer,
) -> None:
    session = uid("s")
    async with memory_service.client(agent=AGENT_A) as client:
        await client.write([("user", "alice's secret plan")], session_id=session, principal="alice")
        mine = await client.recall("session", "plan", session_id=session, principal="alice")
        theirs = await client.recall("session", "plan", session_id=session, principal="bob")
    assert [t.content for t in mine.short_term.window] == ["alice's secret plan"]
    assert theirs.short_term.window == []
    assert theirs.medium_term.summary is None


async def test_fold_digest_and_long_term_listing_with_cursor(
    memory_service: MemoryServer,
) -> None:
    session, principal = uid("s"), uid("p")
    ident = headers(agent=AGENT_A, principal=principal, session=session)
    texts = await seed_facts(memory_service.url, ident, [f"fact{i}" for i in range(5)])

    async def facts() -> list[dict[str, object]]:
        return await list_all(memory_service.url, ident, "session", limit=2)

    listed = await eventually(facts, lambda f: len(f) >= 4, what="facts extracted")
    assert len({f["id"] for f in listed}) == len(listed)
    assert {f["text"] for f in listed} <= set(texts)
    assert all(f["session_id"] == session and f["user_id"] == principal for f in listed)
    assert all(f["agent_id"] == AGENT_A for f in listed)
    status, doc, _ = await call(
        memory_service.url, "/v1/recall", {"level": "session", "query": texts[0]}, hdrs=ident
    )
    assert status == 200
    assert doc["medium_term"]["version"] >= 1 and "fact0" in doc["medium_term"]["summary"]
    assert doc["long_term"]["facts"][0]["text"] == texts[0]
    assert doc["long_term"]["block"].startswith(f"- {texts[0]}")


async def test_facts_without_principal_are_listed_and_erased_at_agent_and_store(
    memory_service: MemoryServer,
) -> None:
    """Regression pin for the backend-specific wildcard: on pgvector ``user_id="*"`` means
    "key present", so a fact written without a principal would be invisible to a store
    view or erasure that put the wildcard on ``user_id``."""
    agent = f"kaos://agent/pin/{uid('a')}"
    session = uid("s")
    ident = headers(agent=agent, session=session)
    texts = await seed_facts(memory_service.url, ident, ["anon1", "anon2"])

    async def agent_facts() -> list[dict[str, object]]:
        return await list_all(memory_service.url, headers(agent=agent), "agent")

    listed = await eventually(agent_facts, lambda f: len(f) == 2, what="anonymous facts")
    assert {f["text"] for f in listed} == set(texts)
    assert all(f["user_id"] is None for f in listed)
    store = await list_all(memory_service.url, {}, "store", limit=1000)
    assert set(texts) <= {f["text"] for f in store}
    status, doc, _ = await call(memory_service.url, "/v1/forget", {"level": "agent"}, hdrs=ident)
    assert status == 200 and doc["forgotten"]["long_term"] == 2, doc
    assert await agent_facts() == []
    store = await list_all(memory_service.url, {}, "store", limit=1000)
    assert not set(texts) & {f["text"] for f in store}


async def test_store_level_forget_reaches_unprincipaled_facts(
    memory_factory: MakeMemory, memory_backend: str
) -> None:
    server = memory_factory(memory_backend, token_budget=200)
    ident = headers(agent=AGENT_B, session=uid("s"))
    await seed_facts(server.url, ident, ["orphan1", "orphan2"])
    await eventually(
        lambda: list_all(server.url, {}, "store"), lambda f: len(f) == 2, what="store facts"
    )
    # Facts are listable a moment before their fold is recorded as extracted; a forget in
    # that moment is still complete (the fenced extraction deletes its own facts), but it
    # counts only what it deleted itself. Counting is what this test checks, so it waits.
    wait_sync(
        lambda: all(f["extraction_status"] == "done" for f in server.db.folds()),
        timeout=60,
    )
    status, doc, _ = await call(server.url, "/v1/forget", {"level": "store"})
    assert status == 200 and doc["forgotten"]["long_term"] == 2, doc
    assert server.db.vector_payloads() == []


async def test_read_ceiling_is_403(memory_factory: MakeMemory, memory_backend: str) -> None:
    server = memory_factory(memory_backend, max_read_scope="session")
    ident = headers(agent=AGENT_A, principal="p", session="s")
    for level in ("agent", "user"):
        for path, body in (
            ("/v1/recall", {"level": level, "query": "q"}),
            ("/v1/list", {"level": level}),
            ("/v1/forget", {"level": level}),
        ):
            status, doc, _ = await call(server.url, path, body, hdrs=ident)
            assert status == 403, (path, level, doc)
            assert error_code(doc) == "above_ceiling"
    status, _, _ = await call(
        server.url, "/v1/recall", {"level": "session", "query": "q"}, hdrs=ident
    )
    assert status == 200


async def test_posture_fails_writes_closed(memory_factory: MakeMemory) -> None:
    server = memory_factory("local", require_principal=True, require_agent_identity=True)
    body = {"turns": [{"role": "user", "content": "x"}]}
    cases = [
        (headers(agent=AGENT_A, session="s"), "principal_required"),
        (headers(principal="p", session="s"), "agent_identity_required"),
    ]
    for hdrs, code in cases:
        status, doc, _ = await call(server.url, "/v1/write", body, hdrs=hdrs)
        assert status == 403 and error_code(doc) == code
    assert server.db.turns() == []
    ok = headers(agent=AGENT_A, principal="p", session="s")
    status, _, _ = await call(server.url, "/v1/write", body, hdrs=ok)
    assert status == 200


async def test_health_readiness_and_metrics(memory_service: MemoryServer) -> None:
    status, doc, _ = await call(memory_service.url, "/readyz", method="GET")
    assert status == 200
    assert doc["checks"] == {"conversation_store": "ok", "vector_store": "ok"}
    status, _, _ = await call(memory_service.url, "/healthz", method="GET")
    assert status == 200
    status, text, _ = await call(memory_service.url, "/metrics", method="GET")
    assert status == 200
    for name in (
        "kaos_memory_http_requests_total",
        "kaos_memory_http_request_duration_seconds_bucket",
        "kaos_memory_executor_queue_depth",
        "kaos_memory_executor_in_flight",
    ):
        assert name in text


@pytest.mark.parametrize("principal", ['{"ne": "nobody"}', "%2A;", "$or", "alice OR 1=1"])
async def test_filter_syntax_in_a_header_is_only_a_name(
    memory_service: MemoryServer, principal: str
) -> None:
    victim = uid("victim")
    await seed_facts(memory_service.url, headers(principal=victim, session=uid("s")), ["v1", "v2"])
    await eventually(
        lambda: list_all(memory_service.url, headers(principal=victim), "user"),
        lambda f: len(f) == 2,
        what="victim facts",
    )
    got = await list_all(memory_service.url, headers(principal=principal), "user")
    assert all(f["user_id"] == principal for f in got)
    assert not [f for f in got if f["user_id"] == victim]
