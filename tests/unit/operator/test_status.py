"""Status building: observedGeneration, kept transition times, change detection."""

from __future__ import annotations

from datetime import UTC, datetime

from kaos_operator.index import RefIndex
from kaos_operator.status import StatusBuilder, status_differs

T1 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T2 = datetime(2026, 1, 1, 13, 0, 0, tzinfo=UTC)


def test_condition_carries_generation_and_time() -> None:
    b = StatusBuilder(None, generation=3, clock=lambda: T1)
    b.condition("Ready", False, "Waiting", "not yet")
    b.fields["phase"] = "Waiting"
    status = b.build()
    assert status == {
        "phase": "Waiting",
        "observedGeneration": 3,
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "reason": "Waiting",
                "message": "not yet",
                "lastTransitionTime": "2026-01-01T12:00:00Z",
                "observedGeneration": 3,
            }
        ],
    }


def test_transition_time_kept_while_status_unchanged() -> None:
    first = StatusBuilder(None, 1, clock=lambda: T1)
    first.condition("Ready", False, "Waiting")
    current = first.build()

    same = StatusBuilder(current, 2, clock=lambda: T2)
    same.condition("Ready", False, "StillWaiting", "other reason, same status")
    assert same.build()["conditions"][0]["lastTransitionTime"] == "2026-01-01T12:00:00Z"

    flipped = StatusBuilder(current, 2, clock=lambda: T2)
    flipped.condition("Ready", True, "Available")
    assert flipped.build()["conditions"][0]["lastTransitionTime"] == "2026-01-01T13:00:00Z"


def test_unchanged_status_is_not_rewritten() -> None:
    b = StatusBuilder(None, 1, clock=lambda: T1)
    b.condition("Ready", True, "Available")
    b.condition("MemoryDegraded", False, "MemoryStoreReady")
    current = b.build()
    again = StatusBuilder(current, 1, clock=lambda: T2)
    again.condition("MemoryDegraded", False, "MemoryStoreReady")
    again.condition("Ready", True, "Available")
    assert not status_differs(current, again.build())
    bumped = StatusBuilder(current, 2, clock=lambda: T2)
    bumped.condition("Ready", True, "Available")
    bumped.condition("MemoryDegraded", False, "MemoryStoreReady")
    assert status_differs(current, bumped.build())


def test_ref_index_tracks_dependents() -> None:
    idx = RefIndex()
    store = ("MemoryStore", "ns", "mem")
    api = ("ModelAPI", "ns", "llm")
    idx.set(("Agent", "ns", "a"), frozenset({store, api}))
    idx.set(("Agent", "ns", "b"), frozenset({api}))
    assert idx.dependents(api) == {("Agent", "ns", "a"), ("Agent", "ns", "b")}
    idx.set(("Agent", "ns", "a"), frozenset({api}))
    assert idx.dependents(store) == frozenset()
    idx.remove(("Agent", "ns", "b"))
    assert idx.dependents(api) == {("Agent", "ns", "a")}
