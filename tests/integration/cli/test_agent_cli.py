"""``kaos agent invoke`` against a real agent runtime (``kaos-agent``) on loopback, whose
model is the development model server (it echoes the last user message)."""

from __future__ import annotations

import json

import pytest
from kaos_cli.main import main

from tests.fixtures.agent import AgentFactory


def test_invoke_prints_the_answer_and_a_fresh_session(
    agent_factory: AgentFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = agent_factory(name="assistant")

    assert main(["agent", "invoke", "assistant", "hello there", "--url", agent.url]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == "Echo: hello there"
    assert captured.err.startswith("session: cli-")
    assert "--session cli-" in captured.err


def test_invoke_with_a_session_and_json(
    agent_factory: AgentFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    agent = agent_factory(name="assistant")
    argv = ["agent", "invoke", "assistant", "ping", "--url", agent.url, "--session", "s-42"]

    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["choices"][0]["message"]["content"] == "Echo: ping"
    # A given session is the caller's to remember: nothing extra on stderr.
    assert captured.err == ""
