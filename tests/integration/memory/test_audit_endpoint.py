"""The erasure audit over HTTP (trusted-header posture), on both backends: every forget
answers with its record's id, ``GET``/``POST /v1/audit`` page the records newest first,
agents are refused, bad query parameters are 400, and no record holds content."""

from __future__ import annotations

from tests.fixtures.memory import MemoryServer
from tests.support.memory_http import AGENT_A, call, headers, uid


async def test_forgets_are_audited_and_listed_newest_first(memory_service: MemoryServer) -> None:
    principal, session = uid("p"), uid("s")
    secret = f"the vault code is {uid('code')}"
    async with memory_service.client(agent=AGENT_A) as client:
        await client.write([("user", secret)], session_id=session, principal=principal)
        by_agent = await client.forget("session", session_id=session, principal=principal)
    assert by_agent.receipt is not None and by_agent.forgotten.short_term == 1
    status, by_admin, _ = await call(
        memory_service.url, "/v1/forget", {"level": "user"}, hdrs=headers(principal=principal)
    )
    assert status == 200 and by_admin["receipt"] > by_agent.receipt

    status, page, _ = await call(memory_service.url, "/v1/audit?limit=1", method="GET")
    assert status == 200, page
    (newest,) = page["records"]
    assert newest["id"] == by_admin["receipt"] and page["next_cursor"] == str(newest["id"])
    assert newest["actor"] == {"kind": "admin", "name": None, "verified": False}
    assert newest["scope"] == {"level": "user", "principal": principal, "agent": None,
                               "session": None}  # fmt: skip
    status, rest, _ = await call(
        memory_service.url, "/v1/audit", {"limit": 1, "cursor": page["next_cursor"]}
    )
    assert status == 200
    (older,) = rest["records"]
    assert older["id"] == by_agent.receipt and older["final"]
    assert older["actor"] == {"kind": "agent", "name": AGENT_A, "verified": False}
    assert older["scope"]["session"] == session
    assert older["forgotten"] == {"short_term": 1, "medium_term": 0, "long_term": 0}
    assert secret not in str(page) + str(rest)


async def test_the_audit_refuses_agents_and_bad_queries(memory_service: MemoryServer) -> None:
    url = memory_service.url
    for method, body in (("GET", None), ("POST", {})):
        status, doc, _ = await call(url, "/v1/audit", body, method=method,
                                    hdrs=headers(agent=AGENT_A))  # fmt: skip
        assert status == 403 and doc["error"]["code"] == "audit_forbidden", doc
    for query in (
        "limit=abc",
        "limit=0",
        "limit=5000",
        "cursor=x1",
        "level=store",
        "limit=1&limit=2",
    ):
        status, doc, _ = await call(url, f"/v1/audit?{query}", method="GET")
        assert status == 400, (query, doc)
        assert doc["error"]["code"] in ("invalid_query", "invalid_body"), doc
    status, doc, _ = await call(url, "/v1/audit", {"limit": 1, "principal": "bob"})
    assert status == 400 and doc["error"]["code"] == "identity_in_body"
