"""The token estimate every KAOS component sizes windows with.

A deterministic approximation, ``ceil(chars / 4)`` plus a small per-turn overhead for the
role framing: close enough to BPE counts for English to size a window, identical in the
agent's pod-local window and on every memory replica, and free of tokenizer downloads.
"""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 4
TURN_OVERHEAD_TOKENS = 4


def turn_tokens(text: str) -> int:
    """Estimated tokens of one turn whose content is ``text``."""
    return math.ceil(len(text) / CHARS_PER_TOKEN) + TURN_OVERHEAD_TOKENS
