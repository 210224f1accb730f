"""Property: every read at every level returns exactly what its scope filter allows.

Random interleavings of writes by three principals (and none), three agents (and none)
and three sessions go to the real service; after the background folds settle, every
level is read for a set of drawn reader identities. ``list`` must return exactly the
facts the filter allows (nothing from another tenant, nothing missing); ``recall`` must
never return anything outside it; a read sees a session's digest only if its own
principal (or, without one, a write without one) wrote to the session: a session id is
each principal's own, whoever used it first.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.memory import MemoryServer
from tests.support.memory_http import call, eventually, headers, list_all, long_text

PRINCIPALS = ["p1", "p2", "p3", None]
AGENTS = ["kaos://agent/t/a1", "kaos://agent/t/a2", "kaos://agent/t/a3", None]
SESSIONS = ["s1", "s2", "s3"]
LEVELS = ["session", "agent", "user", "store"]
# Over a 200-token budget on its own: every write folds, so every write becomes a fact.
CHARS = 840


@dataclass(frozen=True)
class Written:
    text: str
    principal: str | None
    agent: str | None
    session: str


writes = st.lists(
    st.tuples(st.sampled_from(PRINCIPALS), st.sampled_from(AGENTS), st.sampled_from(SESSIONS)),
    min_size=3,
    max_size=9,
)
readers = st.lists(
    st.tuples(
        st.sampled_from(PRINCIPALS), st.sampled_from(AGENTS), st.sampled_from([*SESSIONS, None])
    ),
    min_size=3,
    max_size=6,
    unique=True,
)


def allowed(level: str, reader: tuple[str | None, str | None, str | None], fact: Written) -> bool:
    principal, agent, session = reader
    if level == "session":
        return fact.session == session and (principal is None or fact.principal == principal)
    if level == "agent":
        return fact.agent == agent and (principal is None or fact.principal == principal)
    if level == "user":
        return fact.principal == principal
    return True


def resolvable(level: str, reader: tuple[str | None, str | None, str | None]) -> bool:
    principal, agent, session = reader
    return {
        "session": session is not None,
        "agent": agent is not None,
        "user": principal is not None,
        "store": agent is None,
    }[level]


async def run_example(
    server: MemoryServer,
    plan: list[tuple[str | None, str | None, str]],
    reader_ids: list[tuple[str | None, str | None, str | None]],
) -> None:
    status, doc, _ = await call(server.url, "/v1/forget", {"level": "store"})
    assert status == 200 and not doc["degraded"], doc
    written: list[Written] = []
    for n, (principal, agent, session) in enumerate(plan):
        text = long_text(f"w{n}z{principal}z{session}", chars=CHARS)
        status, doc, _ = await call(
            server.url,
            "/v1/write",
            {"turns": [{"role": "user", "content": text}], "infer": False},
            hdrs=headers(agent=agent, principal=principal, session=session),
        )
        assert status in (200, 202), doc
        written.append(Written(text, principal, agent, session))
    if not written:
        return

    await eventually(
        lambda: list_all(server.url, {}, "store"),
        lambda facts: len(facts) == len(written),
        what="every write extracted",
    )
    by_text = {w.text: w for w in written}
    for level, reader in itertools.product(LEVELS, reader_ids):
        if not resolvable(level, reader):
            continue
        principal, agent, session = reader
        ident = headers(agent=agent, principal=principal, session=session)
        expected = {w.text for w in written if allowed(level, reader, w)}
        listed = await list_all(server.url, ident, level, limit=4)
        got = [f["text"] for f in listed]
        assert len(got) == len(set(got)), "a fact was listed twice across pages"
        assert set(got) == expected, (level, reader)
        for fact in listed:
            source = by_text[fact["text"]]
            assert (fact["user_id"], fact["agent_id"], fact["session_id"]) == (
                source.principal,
                source.agent,
                source.session,
            )
        query = next(iter(expected)) if expected else written[0].text
        status, doc, _ = await call(
            server.url,
            "/v1/recall",
            {
                "level": level,
                "query": query,
                "top_k": 100,
                "include": ["long_term"] if session is None else ["long_term", "medium_term"],
            },
            hdrs=ident,
        )
        assert status == 200 and not doc["degraded"], doc
        recalled = {f["text"] for f in doc["long_term"]["facts"]}
        assert recalled <= expected, (level, reader, recalled - expected)
        if expected:
            assert query in recalled
        mine = any(w.session == session and w.principal == principal for w in written)
        if level != "store" and session is not None and not mine:
            assert doc["medium_term"]["summary"] is None, (level, reader)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=writes, reader_ids=readers)
def test_every_read_returns_exactly_its_scope(
    memory_service: MemoryServer,
    plan: list[tuple[str | None, str | None, str]],
    reader_ids: list[tuple[str | None, str | None, str | None]],
) -> None:
    asyncio.run(run_example(memory_service, plan, reader_ids))
