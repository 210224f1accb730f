"""Window and fold arithmetic, and the digest prompt the devmodel recognises."""

from __future__ import annotations

from kaos_memory.compaction import (
    count_tokens,
    digest_messages,
    window,
)
from kaos_memory.storage.base import FoldPolicy, TurnRow


def turn(seq: int, tokens: int, role: str = "user", content: str = "x") -> TurnRow:
    return TurnRow(seq, role, content, tokens, "t", None, None, True)


def test_count_tokens_is_deterministic_and_grows_with_text() -> None:
    assert count_tokens("") == count_tokens("") > 0
    assert count_tokens("a" * 400) == 100 + count_tokens("")
    assert count_tokens("abcd") < count_tokens("abcde")


def test_window_is_the_newest_suffix_within_budget_and_cap() -> None:
    rows = [turn(i, 10) for i in range(10, 0, -1)]  # newest first
    assert [t.seq for t in window(rows, budget=35, max_events=100)] == [8, 9, 10]
    assert [t.seq for t in window(rows, budget=1000, max_events=2)] == [9, 10]
    # A turn that does not fit ends the window: no gaps.
    rows = [turn(3, 10), turn(2, 100), turn(1, 1)]
    assert [t.seq for t in window(rows, budget=50, max_events=100)] == [3]


def test_fold_policy_selects_the_oldest_turns_down_to_the_target() -> None:
    policy = FoldPolicy(trigger_tokens=100, target_tokens=50, max_events=1000)
    assert policy.select([(i, 10) for i in range(10)]) == 0  # 100 is not past 100
    sizes = [(i, 10) for i in range(11)]  # 110 tokens
    assert policy.select(sizes) == 6  # leaves 50
    event_policy = FoldPolicy(trigger_tokens=10_000, target_tokens=5_000, max_events=10)
    assert event_policy.select([(i, 1) for i in range(11)]) == 6  # leaves 5 events


def test_digest_prompt_shape() -> None:
    msgs = digest_messages("Earlier.", [turn(1, 1, "user", "hi"), turn(2, 1, "assistant", "yo")])
    assert msgs[0]["role"] == "system"
    assert msgs[0]["content"].startswith("You write the KAOS session digest.")
    user = msgs[1]["content"]
    assert "## Previous digest\nEarlier." in user
    assert "## New turns\nuser: hi\nassistant: yo" in user
    assert "## Previous digest\n(none)" in digest_messages(None, [])[1]["content"]
