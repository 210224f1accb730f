"""Window arithmetic, token counts and the digest prompt: pure functions over turn rows.

How much a fold evicts is ``FoldPolicy``'s (``storage.base``), the value the service hands
to the store with each write.

Tokens are a deterministic approximation, ``ceil(chars / 4)`` plus a small per-turn
overhead for the role framing: close enough to BPE counts for English to size a window,
identical on every replica, and free of tokenizer downloads.
"""

from __future__ import annotations

from collections.abc import Sequence

from kaos_core.tokens import turn_tokens

from kaos_memory.settings import TierSettings
from kaos_memory.storage.base import FoldPolicy, TurnRow

DIGEST_SYSTEM_PROMPT = (
    "You write the KAOS session digest. Merge the previous digest and the new turns into "
    "one concise narrative of this conversation so far: who the user is, what they asked, "
    "what was decided and what is still open. Write plain prose, no lists of turns, no "
    "preamble. Keep every fact that later turns may rely on."
)


def fold_policy(tiers: TierSettings) -> FoldPolicy:
    """The fold decision a write hands to the store, from the tier settings."""
    return FoldPolicy(
        trigger_tokens=tiers.fold_trigger,
        target_tokens=tiers.fold_target,
        max_events=tiers.max_events,
    )


def count_tokens(text: str) -> int:
    return turn_tokens(text)


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


def digest_messages(
    previous: str | None, turns: Sequence[TurnRow], system_prompt: str | None = None
) -> list[dict[str, str]]:
    """Chat messages asking the summarisation model for the next digest version
    (``system_prompt`` replaces the built-in one)."""
    lines = "\n".join(f"{t.role}: {t.content}" for t in turns)
    user = f"## Previous digest\n{previous if previous else '(none)'}\n\n## New turns\n{lines}\n"
    return [
        {"role": "system", "content": system_prompt or DIGEST_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]
