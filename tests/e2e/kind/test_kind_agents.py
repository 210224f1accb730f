"""The sample agents answer in the cluster: through their Service, with the ModelAPI
(LiteLLM in front of the development model server), their MCP tools, delegation over
A2A, and the memory store they are bound to."""

from __future__ import annotations

import pytest

from tests.e2e.kind.helpers import (
    SUITE_TIMEOUT,
    KindDeployment,
    answer_text,
    ask,
    token,
    with_memory,
)

pytestmark = [pytest.mark.kind, pytest.mark.timeout(SUITE_TIMEOUT)]


def test_agent_answers_and_remembers_through_its_store(kind: KindDeployment) -> None:
    mark = token()
    session, principal = f"chat-{mark}", f"alice-{mark}"
    message = f"hello from the kind suite {mark}"

    answer = answer_text(ask(kind, "coordinator", message, session=session, principal=principal))

    # The development model echoes the user's message: the answer made the whole trip.
    assert answer == f"Echo: {message}"
    # The agent wrote the turn to memory-local before answering, under its own identity,
    # the caller's principal and session.
    recalled = with_memory(
        kind,
        "memory-local",
        "coordinator",
        lambda m: m.recall(
            "session", message, session_id=session, principal=principal, include=["short_term"]
        ),
    )
    window = [(t.role, t.content) for t in recalled.short_term.window]
    assert ("user", message) in window
    assert ("assistant", answer) in window
    assert window.index(("user", message)) < window.index(("assistant", answer))
    assert not recalled.degraded


def test_researcher_runs_its_mcp_tool(kind: KindDeployment) -> None:
    mark = token()
    message = f'[[call shout {{"text": "kaos {mark}"}}]]'

    answer = answer_text(
        ask(kind, "researcher", message, session=f"mcp-{mark}", principal=f"alice-{mark}")
    )

    # The model called `shout` of the text-tools MCPServer, which ran in its own pod.
    assert answer.startswith("Tool shout returned:"), answer
    assert f"KAOS {mark.upper()}" in answer


def test_coordinator_delegates_to_researcher(kind: KindDeployment) -> None:
    mark = token()
    message = f'[[call delegate_to_researcher {{"message": "ping {mark}"}}]]'

    answer = answer_text(
        ask(kind, "coordinator", message, session=f"a2a-{mark}", principal=f"alice-{mark}")
    )

    # The researcher's own answer (its echo) came back as the delegation tool's result.
    assert answer.startswith("Tool delegate_to_researcher returned:"), answer
    assert f"Echo: ping {mark}" in answer
