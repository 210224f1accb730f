"""What a run that a limit ended answers: the words for each limit (``kaos_agent.runner``)."""

from __future__ import annotations


def step_limit_text(max_steps: int) -> str:
    return (
        f"I stopped after reaching the limit of {max_steps} reasoning steps without a final "
        "answer. Please narrow the request or try again."
    )


def tool_budget_text(max_tool_calls: int) -> str:
    return (
        f"I stopped because this task reached its budget of {max_tool_calls} tool calls "
        "before a final answer. Please narrow the request or try again."
    )


def time_budget_text(seconds: float) -> str:
    return (
        f"I stopped because this task reached its time budget of {seconds:g} seconds "
        "before a final answer. Please narrow the request or try again."
    )


def token_budget_text(tokens: int) -> str:
    return (
        f"I stopped because this run reached its budget of {tokens} tokens before a final "
        "answer. Please narrow the request or try again later."
    )


OUT_OF_TIME = "I ran out of time before reaching a final answer."
