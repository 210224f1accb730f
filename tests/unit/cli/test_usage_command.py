"""``kaos usage`` without a cluster: rows summed by agent, user or day (every count, in
key order), the total row of the table, CSV with a header, and the refusals it decides
itself. Against real agents: tests/integration/agent/test_usage.py."""

from __future__ import annotations

import pytest
from kaos_cli.commands.usage import summed, total
from kaos_cli.main import main

ROWS = [
    {"agent": "b", "user": "alice", "day": "2026-03-02", "inputTokens": 1, "outputTokens": 2,
     "totalTokens": 3, "runs": 1},
    {"agent": "a", "user": "bob", "day": "2026-03-01", "inputTokens": 10, "outputTokens": 20,
     "totalTokens": 30, "runs": 2},
    {"agent": "a", "user": "alice", "day": "2026-03-02", "inputTokens": 100, "outputTokens": 200,
     "totalTokens": 300, "runs": 3},
]  # fmt: skip


def test_rows_are_summed_by_the_chosen_key() -> None:
    by_user = summed(ROWS, "user")
    assert [(r["user"], r["totalTokens"], r["runs"]) for r in by_user] == [
        ("alice", 303, 4),
        ("bob", 30, 2),
    ]
    assert [(r["agent"], r["inputTokens"]) for r in summed(ROWS, "agent")] == [
        ("a", 110),
        ("b", 1),
    ]
    assert [r["day"] for r in summed(ROWS, "day")] == ["2026-03-01", "2026-03-02"]
    every = summed(ROWS, None)
    assert [(r["day"], r["agent"], r["user"]) for r in every] == [
        ("2026-03-01", "a", "bob"),
        ("2026-03-02", "a", "alice"),
        ("2026-03-02", "b", "alice"),
    ]
    assert total(every) == {"inputTokens": 111, "outputTokens": 222, "totalTokens": 333, "runs": 6}


def test_agents_and_urls_do_not_mix(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "billing", "--url", "http://127.0.0.1:9"]) != 0
    assert "name agents or give --url, not both" in capsys.readouterr().err


def test_an_unreachable_agent_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["usage", "--url", "http://127.0.0.1:9", "-o", "csv"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "127.0.0.1:9" in err
    assert "Traceback" not in err
