"""Knowledge both images use, in one place: the token estimate and capped backoff."""

from __future__ import annotations

import pytest
from kaos_agent.context import RunDeps
from kaos_agent.memory.local import LocalMemory
from kaos_core.backoff import capped_backoff
from kaos_core.memory.contract import Turn
from kaos_core.tokens import TURN_OVERHEAD_TOKENS, turn_tokens
from kaos_memory.compaction import count_tokens


def test_token_estimate_is_the_documented_formula() -> None:
    # ceil(chars / 4) + 4 per turn, as the memory service's README documents.
    assert turn_tokens("") == TURN_OVERHEAD_TOKENS == 4
    assert turn_tokens("abcd") == 5
    assert turn_tokens("abcde") == 6


@pytest.mark.parametrize("text", ["", "a", "hello there", "x" * 1001])
def test_agent_and_memory_service_count_the_same(text: str) -> None:
    assert count_tokens(text) == turn_tokens(text)


async def test_the_local_window_uses_the_shared_estimate() -> None:
    # Two turns of 20 characters are 9 tokens each: a budget of 17 keeps only the newest.
    memory = LocalMemory(17)
    deps = RunDeps(session_id="s")
    await memory.remember(deps, [Turn(role="user", content="a" * 20)])
    await memory.remember(deps, [Turn(role="user", content="b" * 20)])
    assert [t.content for t in memory.window(deps)] == ["b" * 20]
    memory = LocalMemory(18)
    await memory.remember(deps, [Turn(role="user", content="a" * 20)])
    await memory.remember(deps, [Turn(role="user", content="b" * 20)])
    assert len(memory.window(deps)) == 2


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [capped_backoff(n, base=0.5, cap=3.0) for n in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert capped_backoff(10_000, base=1.0, cap=900.0) == 900.0  # no overflow
    with pytest.raises(ValueError):
        capped_backoff(-1, base=1.0, cap=1.0)
