"""Memory is augmentation: when an Agent's MemoryStore is deleted the operator marks the
Agent ``MemoryDegraded`` and the agent keeps answering; when the store returns the
condition clears. The Agent is ``archivist`` (tests/e2e/kind/manifests), bound to the
external store, whose data lives in PostgreSQL and so outlives the MemoryStore object."""

from __future__ import annotations

import pytest
from kaos_core.crds import reasons

from tests.e2e.kind.helpers import (
    ROLLOUT_TIMEOUT,
    SUITE_TIMEOUT,
    KindDeployment,
    answer_text,
    ask,
    condition,
    token,
    wait_for_condition,
    with_memory,
)
from tests.support.procs import REPO_ROOT

pytestmark = [pytest.mark.kind, pytest.mark.timeout(SUITE_TIMEOUT)]

AGENT = "archivist"
STORE = "memory-pgvector"
STORE_SAMPLE = REPO_ROOT / "samples" / "memorystore-external.yaml"


def restore_store(kind: KindDeployment) -> None:
    kind.kubectl(
        "apply", "--server-side", "--force-conflicts", "--field-manager=kaos-kind",
        "-f", str(STORE_SAMPLE),
    )  # fmt: skip


def test_memory_degraded_appears_when_the_store_is_deleted_and_clears_when_it_returns(
    kind: KindDeployment,
) -> None:
    mark = token()
    session, principal = f"degraded-{mark}", f"alice-{mark}"
    before = wait_for_condition(kind, "agents", AGENT, reasons.MEMORY_DEGRADED, "False")
    assert before["reason"] == reasons.MEMORY_STORE_READY
    first = f"before the outage {mark}"
    assert answer_text(ask(kind, AGENT, first, session=session, principal=principal)) == (
        f"Echo: {first}"
    )

    try:
        kind.kubectl("delete", f"memorystores.kaos.tools/{STORE}", "--wait=true", timeout=180)

        degraded = wait_for_condition(kind, "agents", AGENT, reasons.MEMORY_DEGRADED, "True")
        assert degraded["reason"] == reasons.MEMORY_STORE_NOT_FOUND
        assert STORE in degraded["message"]
        # Still serving, on its short-term window only.
        during = f"during the outage {mark}"
        assert answer_text(ask(kind, AGENT, during, session=session, principal=principal)) == (
            f"Echo: {during}"
        )
        agent = kind.get("agents.kaos.tools", AGENT)
        assert (condition(agent, reasons.READY) or {}).get("status") == "True", agent
    finally:
        restore_store(kind)

    wait_for_condition(kind, "memorystores", STORE, reasons.READY, "True", timeout=ROLLOUT_TIMEOUT)
    cleared = wait_for_condition(kind, "agents", AGENT, reasons.MEMORY_DEGRADED, "False")
    assert cleared["reason"] == reasons.MEMORY_STORE_READY

    # The turns written before the outage are still in PostgreSQL for the new store pods.
    recalled = with_memory(
        kind,
        STORE,
        AGENT,
        lambda m: m.recall("session", first, session_id=session, principal=principal),
    )
    window = [(t.role, t.content) for t in recalled.short_term.window]
    assert ("user", first) in window
    assert ("assistant", f"Echo: {first}") in window
