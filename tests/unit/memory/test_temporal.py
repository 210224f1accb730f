"""Bi-temporal facts: which versions a view sees, and the check of the model's answer to
the supersession call (only the labels it was shown, in the shape asked for)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest
from kaos_memory.storage.base import CURRENT, View
from kaos_memory.storage.mem0.temporal import Batch, Candidate, decisions, retired, visible


def fact(fact_id: str, at: str, text: str = "x", **extra: str) -> Candidate:
    payload: dict[str, Any] = {
        "data": text,
        "kaos_source": "user",
        "kaos_turns": "1",
        "kaos_at": at,
        "created_at": at,
        **extra,
    }
    return Candidate(fact_id, payload)


LISBON = fact("a", "2026-01-01T10:00:00+00:00", "I live in Lisbon")
PORTO = fact("b", "2026-03-01T10:00:00+00:00", "We moved to Porto")
WORK = fact("c", "2026-01-02T10:00:00+00:00", "I work at Initech")
BATCH = Batch(new=[PORTO], nearest=[[LISBON, WORK]])


def test_a_retired_fact_is_true_until_its_replacement_was() -> None:
    old = retired(LISBON.payload, PORTO, "2026-03-02T00:00:00+00:00")
    assert old["kaos_valid_to"] == "2026-03-01T10:00:00+00:00"
    assert old["kaos_retired_at"] == "2026-03-02T00:00:00+00:00"
    assert old["kaos_superseded_by"] == "b"
    assert not visible(old, CURRENT)
    assert visible(old, View(history=True))
    assert visible(old, View(as_of=datetime.fromisoformat("2026-02-01T00:00:00+00:00")))
    # Not yet true, and no longer true.
    assert not visible(old, View(as_of=datetime.fromisoformat("2025-12-31T00:00:00+00:00")))
    assert not visible(old, View(as_of=datetime.fromisoformat("2026-03-01T10:00:00+00:00")))
    assert visible(PORTO.payload, View(as_of=datetime.fromisoformat("2026-03-01T10:00:00+00:00")))


def test_a_quarantined_fact_is_in_no_view() -> None:
    held = {**PORTO.payload, "kaos_quarantine": "instruction"}
    assert not any(visible(held, v) for v in (CURRENT, View(history=True)))


def test_the_prompt_labels_each_existing_fact_once() -> None:
    batch = Batch(new=[PORTO, WORK], nearest=[[LISBON, WORK], [WORK]])
    assert batch.prompt().splitlines() == [
        "## New facts",
        "N1: We moved to Porto",
        "  near E1: I live in Lisbon",
        "  near E2: I work at Initech",
        "N2: I work at Initech",
        "  near E2: I work at Initech",
    ]


def test_a_well_formed_answer_names_its_pairs() -> None:
    answer = json.dumps({"retire": [{"existing": "E1", "by": "N1"}]})
    assert decisions(answer, BATCH) == [(LISBON, PORTO)]
    assert decisions('{"retire": []}', BATCH) == []


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "",
        "Sure! E1 is replaced.",
        "[]",
        '{"memory": []}',
        '{"retire": "E1"}',
        '{"retire": ["E1"]}',
        # A label it was not shown, a new fact that does not exist, a malformed label.
        '{"retire": [{"existing": "E9", "by": "N1"}]}',
        '{"retire": [{"existing": "E1", "by": "N2"}]}',
        '{"retire": [{"existing": "E1", "by": "Nx"}]}',
        '{"retire": [{"existing": "E1"}]}',
        # A fact id instead of a label.
        '{"retire": [{"existing": "a", "by": "N1"}]}',
    ],
)
def test_any_other_answer_retires_nothing(answer: str | None) -> None:
    assert decisions(answer, BATCH) is None


def test_an_existing_fact_is_retired_only_by_a_new_fact_it_was_shown_beside() -> None:
    batch = Batch(new=[PORTO, WORK], nearest=[[LISBON], [WORK]])
    # E1 (Lisbon) was shown beside N1 only.
    assert decisions('{"retire": [{"existing": "E1", "by": "N2"}]}', batch) is None


def test_world_time_decides_which_of_a_pair_stands() -> None:
    from kaos_memory.storage.mem0.temporal import in_world_order

    # The model named the later fact as retired: the earlier one is retired instead.
    assert in_world_order(PORTO, LISBON) == (LISBON, PORTO)
    assert in_world_order(LISBON, PORTO) == (LISBON, PORTO)


def test_a_candidate_outside_the_owner_is_never_shown() -> None:
    from kaos_memory.storage.mem0.temporal import _owned

    owner = {"kaos_group": "g", "user_id": "alice", "agent_id": "a", "run_id": "*"}
    mine = {"kaos_group": "g", "user_id": "alice", "agent_id": "a", "run_id": "s1"}
    assert _owned(mine, owner)
    assert not _owned({**mine, "user_id": "bob"}, owner)
    assert not _owned({**mine, "kaos_group": "other"}, owner)
    assert not _owned({k: v for k, v in mine.items() if k != "agent_id"}, owner)
