"""Turns to history and back, and the pod-local window's token budget."""

from __future__ import annotations

from kaos_agent.context import RunDeps
from kaos_agent.memory.local import LocalMemory
from kaos_agent.memory.turns import messages_from_turns, turns_from_messages
from kaos_core.memory.contract import Turn
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)


def test_run_messages_become_text_turns() -> None:
    messages: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("shout hi")]),
        ModelResponse(parts=[ToolCallPart("shout", {"text": "hi"}, tool_call_id="c1")]),
        ModelRequest(parts=[ToolReturnPart("shout", "HI", tool_call_id="c1")]),
        ModelResponse(parts=[TextPart("It says HI")]),
    ]
    assert [(t.role, t.content) for t in turns_from_messages(messages)] == [
        ("user", "shout hi"),
        ("tool", 'call shout({"text":"hi"})'),
        ("tool", "shout returned: HI"),
        ("assistant", "It says HI"),
    ]


def test_turns_replay_in_order_with_the_digest_first() -> None:
    history = messages_from_turns(
        [("user", "a"), ("tool", "t"), ("assistant", "b"), ("user", "c")], digest="earlier"
    )
    assert [type(m) for m in history] == [ModelRequest, ModelResponse, ModelRequest]
    first = history[0]
    assert isinstance(first, ModelRequest)
    assert isinstance(first.parts[0], SystemPromptPart) and "earlier" in first.parts[0].content
    assert isinstance(first.parts[1], UserPromptPart) and first.parts[1].content == "a"
    second = history[1]
    assert isinstance(second, ModelResponse)
    assert [p.content for p in second.parts if isinstance(p, TextPart)] == ["t", "b"]


async def test_local_window_is_per_principal_and_session_and_bounded() -> None:
    memory = LocalMemory(token_budget=64)
    alice = RunDeps(session_id="s1", principal="alice")
    await memory.remember(
        alice, [Turn(role="user", content="hello"), Turn(role="assistant", content="hi")]
    )
    assert [t.content for t in memory.window(alice)] == ["hello", "hi"]
    assert memory.window(RunDeps(session_id="s1", principal="mallory")) == []
    assert memory.window(RunDeps(session_id="s2", principal="alice")) == []
    for i in range(20):
        await memory.remember(
            alice,
            [
                Turn(role="user", content=f"question {i} " + "x" * 40),
                Turn(role="assistant", content="ok"),
            ],
        )
    window = memory.window(alice)
    assert sum((len(t.content) + 3) // 4 for t in window) <= 64
    # Oldest first out; the window still starts at a question.
    assert window[0].role == "user"
    assert "question 19" in window[-2].content and window[-1].content == "ok"
    assert not any("question 0 " in t.content for t in window)
