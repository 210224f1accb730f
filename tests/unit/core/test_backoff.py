"""``capped_backoff``: the one delay rule every retry in KAOS waits by."""

from __future__ import annotations

import pytest
from kaos_core.backoff import capped_backoff


def test_doubles_from_the_base_and_stops_at_the_cap() -> None:
    delays = [capped_backoff(attempt, base=0.5, cap=5.0) for attempt in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]


def test_any_number_of_failures_stays_a_float_at_the_cap() -> None:
    assert capped_backoff(10_000, base=1.0, cap=60.0) == 60.0
    assert capped_backoff(0, base=0.0, cap=0.0) == 0.0


def test_a_negative_attempt_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="attempt"):
        capped_backoff(-1, base=1.0, cap=2.0)
