"""An extraction answer is read with Mem0 2.2.1's own parsing steps, and an answer that is
not Mem0's ``{"memory": [...]}`` is told apart from a valid answer with no facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kaos_memory.storage.mem0.llm import Judged, attributed, judge

FACT = '{"memory": [{"id": "0", "text": "I keep bees", "attributed_to": "user"}]}'


@pytest.fixture(autouse=True)
def _mem0_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Mem0 reads both at import (``judge`` imports its parsing helpers).
    monkeypatch.setenv("MEM0_TELEMETRY", "False")
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))


@pytest.mark.parametrize(
    ("answer", "finish", "expected"),
    [
        (FACT, "stop", Judged("facts")),
        # What Mem0 itself gets past: a code fence, a reasoning block, prose around JSON.
        (f"```json\n{FACT}\n```", "stop", Judged("facts")),
        (f"<think>the user keeps bees</think>{FACT}", None, Judged("facts")),
        (f"Here you go: {FACT} Hope that helps!", "stop", Judged("facts")),
        # Valid, and nothing worth keeping: not unusable.
        ('{"memory": []}', "stop", Judged("no_facts")),
        ('{"memory": [{"id": "0", "text": ""}]}', "stop", Judged("no_facts")),
        # The format's placeholder, copied by a small model: no fact.
        ('{"memory": [{"id": "0", "text": "..."}]}', "stop", Judged("no_facts")),
        ('{"memory": [{"id": "0", "text": " - "}]}', "stop", Judged("no_facts")),
        ("", "stop", Judged("unusable", "empty")),
        (None, "stop", Judged("unusable", "empty")),
        ("<think>hmm</think>", "stop", Judged("unusable", "empty")),
        ("The user keeps bees.", "stop", Judged("unusable", "not_json")),
        ('{"memory": [{"id": "0", "text": "I keep', "stop", Judged("unusable", "not_json")),
        (FACT[: len(FACT) // 2], "length", Judged("unusable", "cut_off")),
        (FACT, "length", Judged("unusable", "cut_off")),
        # JSON, but not Mem0's shape (Mem0 reads the first two as no facts, and fails on
        # the last two further on).
        ("{}", "stop", Judged("unusable", "not_memory_json")),
        ('["I keep bees"]', "stop", Judged("unusable", "not_memory_json")),
        ('{"memory": ["I keep bees"]}', "stop", Judged("unusable", "not_memory_json")),
        ('{"memory": [{"text": 42}]}', "stop", Judged("unusable", "not_memory_json")),
    ],
)
def test_answers_are_judged_as_mem0_reads_them(
    answer: str | None, finish: str | None, expected: Judged
) -> None:
    assert judge(answer, finish) == expected


def test_placeholder_facts_are_dropped_and_the_others_reach_mem0() -> None:
    answer = json.dumps(
        {
            "memory": [
                {"id": "0", "text": "...", "attributed_to": "user"},
                {"id": "1", "text": "I keep bees", "attributed_to": "user"},
                {"id": "2", "text": "…", "attributed_to": "user"},
            ]
        }
    )
    verdict = judge(answer, "stop")

    assert verdict == Judged("facts")
    assert [m["text"] for m in json.loads(attributed(verdict))["memory"]] == ["I keep bees"]
