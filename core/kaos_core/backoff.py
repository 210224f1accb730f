"""Capped exponential backoff: the one delay rule for retries anywhere in KAOS."""

from __future__ import annotations

# 2**62 times any sane base is far beyond any cap; clamping the exponent keeps the
# arithmetic in floats however many failures a counter has seen.
_MAX_EXPONENT = 62


def capped_backoff(attempt: int, *, base: float, cap: float) -> float:
    """The delay before retry ``attempt`` (0 for the first retry): ``base * 2**attempt``,
    never more than ``cap``."""
    if attempt < 0:
        raise ValueError("attempt must be >= 0")
    return float(min(base * 2 ** min(attempt, _MAX_EXPONENT), cap))
