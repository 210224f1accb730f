"""Window and fold arithmetic, and the digest prompt: pure functions over turn rows.

Tokens are a deterministic approximation, ``ceil(chars / 4)`` plus a small per-turn
overhead for the role framing: close enough to BPE counts for English to size a window,
identical on every replica, and free of tokenizer downloads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kaos_memory.storage.base import FoldPolicy, TurnRow

TURN_OVERHEAD_TOKENS = 4
DIGEST_SYSTEM_PROMPT = (
    "You write the KAOS session digest. Merge the previous digest and the new turns into "
    "one concise narrative of this conversation so far: who the user is, what they asked, "
    "what was decided and what is still open. Write plain prose, no lists of turns, no "
    "preamble. Keep every fact that later turns may rely on."
)


def count_tokens(text: str) -> int:
    return math.ceil(len(text) / 4) + TURN_OVERHEAD_TOKENS


def window(rows_newest_first: Sequence[TurnRow], budget: int, max_events: int) -> list[TurnRow]:
    """The newest turns that fit the token budget and the event cap, oldest first.

    Stops at the first turn that does not fit, so the window is always a contiguous
    suffix of the conversation (no gaps that would confuse a replay).
    """
    taken: list[TurnRow] = []
    used = 0
    for row in rows_newest_first:
        if len(taken) >= max_events or used + row.tokens > budget:
            break
        taken.append(row)
        used += row.tokens
    taken.reverse()
    return taken


def needs_fold(tokens: int, events: int, policy: FoldPolicy) -> bool:
    return tokens > policy.trigger_tokens or events > policy.max_events


def select_fold(sizes_oldest_first: Sequence[tuple[int, int]], policy: FoldPolicy) -> int:
    """How many of the oldest unfolded turns to fold (0: the trigger is not crossed).

    ``sizes_oldest_first`` holds ``(seq, tokens)``. The oldest turns go until the rest is
    within the fold target and within half the event cap, so a fold makes room for
    several more writes before the next one.
    """
    total = sum(t for _, t in sizes_oldest_first)
    events = len(sizes_oldest_first)
    if not needs_fold(total, events, policy):
        return 0
    event_target = max(1, policy.max_events // 2)
    count = 0
    for _, tokens in sizes_oldest_first:
        if total <= policy.target_tokens and events - count <= event_target:
            break
        total -= tokens
        count += 1
    return count


def digest_messages(previous: str | None, turns: Sequence[TurnRow]) -> list[dict[str, str]]:
    """Chat messages asking the summarisation model for the next digest version."""
    lines = "\n".join(f"{t.role}: {t.content}" for t in turns)
    user = f"## Previous digest\n{previous if previous else '(none)'}\n\n## New turns\n{lines}\n"
    return [
        {"role": "system", "content": DIGEST_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]
