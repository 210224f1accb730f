"""Both sample MemoryStores in the cluster, through a port-forward to their Service and
the memory client: the local one (SQLite and Chroma on a PersistentVolume) and the
external one (the chart's development PostgreSQL with pgvector). Each test acts as the
Agent bound to the store, the identity the store serves."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_core.memory.client import MemoryServiceClient
from kaos_core.memory.contract import RecallResponse

from tests.e2e.kind.helpers import (
    FOLD_TIMEOUT,
    SUITE_TIMEOUT,
    KindDeployment,
    memory_of,
    restart_pods,
    store_selector,
    token,
    with_memory,
)
from tests.support.cluster import wait_until

pytestmark = [pytest.mark.kind, pytest.mark.timeout(SUITE_TIMEOUT)]

# (MemoryStore, the sample Agent bound to it)
STORES = [
    pytest.param("memory-local", "coordinator", id="local"),
    pytest.param("memory-pgvector", "archivist", id="external"),
]
# Well over the stores' short-term budget (the default 4096 tokens, at ~chars/4 per turn),
# so one write schedules a fold of the oldest turns.
FILLER = [("assistant", f"filler {i}: " + "the weather stays mild " * 90) for i in range(10)]


def window_of(response: RecallResponse) -> list[tuple[str, str]]:
    return [(t.role, t.content) for t in response.short_term.window]


@pytest.mark.parametrize(("store", "agent"), STORES)
def test_memory_round_trip(kind: KindDeployment, store: str, agent: str) -> None:
    mark = token()
    session, principal = f"rt-{mark}", f"alice-{mark}"
    turns = [("user", f"My locker code is {mark}"), ("assistant", f"Noted: {mark}.")]

    async def write_then_recall(m: MemoryServiceClient) -> RecallResponse:
        written = await m.write(turns, session_id=session, principal=principal)
        assert written.accepted == 2 and not written.degraded
        return await m.recall("session", mark, session_id=session, principal=principal)

    recalled = with_memory(kind, store, agent, write_then_recall)

    assert window_of(recalled) == turns
    assert not recalled.degraded


@pytest.mark.parametrize(("store", "agent"), STORES)
def test_long_term_fact_recalled_in_a_new_session(
    kind: KindDeployment, store: str, agent: str
) -> None:
    mark = token()
    alice, bob = f"alice-{mark}", f"bob-{mark}"
    fact = f"My favourite island is Isla {mark}"

    with memory_of(kind, store, agent) as memory:
        memory(
            lambda m: m.write(
                [("user", fact), ("assistant", "A fine island."), *FILLER],
                session_id=f"s1-{mark}",
                principal=alice,
            )
        )

        def fact_recalled() -> RecallResponse | None:
            # A new session: only the long-term tier can know the fact.
            response = memory(
                lambda m: m.recall("agent", fact, session_id=f"s2-{mark}", principal=alice)
            )
            return response if any(mark in f.text for f in response.long_term.facts) else None

        recalled = wait_until(fact_recalled, timeout=FOLD_TIMEOUT, what=f"the fact in {store}")
        digest = memory(
            lambda m: m.recall("session", fact, session_id=f"s1-{mark}", principal=alice)
        ).medium_term
        # Another principal of the same agent never sees it.
        other = memory(lambda m: m.recall("agent", fact, session_id=f"s1-{mark}", principal=bob))

    assert not recalled.short_term.window  # s2 has no turns of its own
    # The fold that extracted the fact also wrote the session's digest.
    assert digest.version is not None and digest.version >= 1
    assert digest.summary
    assert not [f for f in other.long_term.facts if mark in f.text]
    assert not other.short_term.window


@pytest.mark.parametrize(("store", "agent"), STORES)
def test_two_principals_are_isolated(kind: KindDeployment, store: str, agent: str) -> None:
    mark = token()
    alice, bob = f"alice-{mark}", f"bob-{mark}"
    # A session id is each principal's own: Bob writing to Alice's id, even first, writes a
    # conversation of his own, neither squatting hers nor reading it.
    session, bob_own = f"alice-{mark}", f"bob-{mark}"
    alice_turns = [("user", f"Alice's secret is {mark}"), ("assistant", "Kept.")]
    bob_turns = [("user", "Bob says hello"), ("assistant", "Hello Bob.")]

    async def both(m: MemoryServiceClient) -> tuple[Any, ...]:
        await m.write(bob_turns, session_id=session, principal=bob)
        await m.write(alice_turns, session_id=session, principal=alice)
        await m.write(bob_turns, session_id=bob_own, principal=bob)
        return (
            await m.recall("session", mark, session_id=session, principal=bob),
            await m.recall("session", mark, session_id=session, principal=alice),
            await m.recall("session", mark, session_id=bob_own, principal=bob),
            await m.recall("agent", f"Alice's secret is {mark}", session_id=bob_own, principal=bob),
            await m.list("agent", session_id=bob_own, principal=bob),
        )

    bob_guess, alice_session, bob_session, bob_agent, bob_list = with_memory(
        kind, store, agent, both
    )

    assert window_of(bob_guess) == bob_turns
    assert window_of(alice_session) == alice_turns
    assert window_of(bob_session) == bob_turns
    for response in (bob_guess, bob_session, bob_agent, bob_list):
        seen = [f.text for f in response.long_term.facts] + [
            content for _, content in window_of(response)
        ]
        assert not [text for text in seen if mark in text], seen
        assert not response.degraded


@pytest.mark.parametrize(("store", "agent"), STORES)
def test_window_survives_a_memory_pod_restart(kind: KindDeployment, store: str, agent: str) -> None:
    mark = token()
    session, principal = f"restart-{mark}", f"alice-{mark}"
    turns = [("user", f"Remember {mark} across restarts"), ("assistant", "I will.")]
    with_memory(
        kind, store, agent, lambda m: m.write(turns, session_id=session, principal=principal)
    )

    new_pods = restart_pods(kind, store, store_selector(store))

    assert new_pods
    recalled = with_memory(
        kind,
        store,
        agent,
        lambda m: m.recall("session", mark, session_id=session, principal=principal),
    )
    assert window_of(recalled) == turns
    assert not recalled.degraded
