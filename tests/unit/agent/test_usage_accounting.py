"""Token accounting (``kaos_agent.usage``): a run's limit is the least of ``maxTokens`` and
what is left of each day budget; a budget with nothing left refuses the run 429 with the
seconds to the next UTC midnight; a new UTC day starts afresh; a finished run's tokens go
to its principal's day (``anonymous`` without one) and to the metrics; a ledger that
fails never fails the run's answer; the query of ``GET /v1/usage`` refuses what it does
not understand."""

from __future__ import annotations

import datetime as dt

import pytest
from kaos_agent.context import RunDeps
from kaos_agent.runner import TokenUsage
from kaos_agent.settings import TokenBudgets
from kaos_agent.usage.accounting import BudgetExhausted, UsageAccounting, UsageMetrics
from kaos_agent.usage.ledger import MemoryLedger, Spent, seconds_to_next_day, utc_day
from kaos_agent.usage.openapi import UsageItem
from kaos_agent.usage.query import InvalidQuery, parse_query
from multidict import MultiDict
from prometheus_client import CollectorRegistry

# 2026-03-01 23:59:00 UTC: one minute before a new day.
NEAR_MIDNIGHT = dt.datetime(2026, 3, 1, 23, 59, tzinfo=dt.UTC).timestamp()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def accounting(
    clock: Clock, ledger: MemoryLedger | None = None, **budgets: int
) -> tuple[UsageAccounting, CollectorRegistry]:
    registry = CollectorRegistry()
    made = UsageAccounting(
        "billing",
        TokenBudgets.model_validate(budgets),
        ledger or MemoryLedger(),
        UsageMetrics.create(registry),
        clock=clock,
    )
    return made, registry


def deps(principal: str | None) -> RunDeps:
    return RunDeps(session_id="s", principal=principal)


def test_days_and_their_ends_are_utc() -> None:
    assert utc_day(NEAR_MIDNIGHT) == "2026-03-01"
    assert utc_day(NEAR_MIDNIGHT + 60) == "2026-03-02"
    assert seconds_to_next_day(NEAR_MIDNIGHT) == 60
    assert seconds_to_next_day(NEAR_MIDNIGHT + 59.5) == 1
    assert seconds_to_next_day(NEAR_MIDNIGHT + 60) == 86400


async def test_without_day_budgets_the_limit_is_max_tokens_and_nothing_is_read() -> None:
    class Unreadable(MemoryLedger):
        async def spent(self, agent: str, principal: str, day: str) -> Spent:
            raise AssertionError("read without a day budget")

    made, _ = accounting(Clock(NEAR_MIDNIGHT), Unreadable())
    assert await made.admit(deps("alice")) is None
    made, _ = accounting(Clock(NEAR_MIDNIGHT), Unreadable(), max_tokens=500)
    assert await made.admit(deps("alice")) == 500


async def test_the_limit_is_the_least_of_max_tokens_and_what_is_left() -> None:
    clock = Clock(NEAR_MIDNIGHT)
    made, _ = accounting(clock, max_tokens=500, tokens_per_day=1000, tokens_per_user_per_day=300)
    assert await made.admit(deps("alice")) == 300
    await made.record(deps("alice"), "chat", TokenUsage(100, 50))
    assert await made.admit(deps("alice")) == 150  # her own day: 300 - 150
    assert await made.admit(deps("bob")) == 300
    await made.record(deps("bob"), "chat", TokenUsage(600, 100))
    # The agent's day (1000 - 850) is less than what bob or alice have left.
    assert await made.admit(deps("alice")) == 150
    assert await made.admit(deps("carol")) == 150


async def test_a_used_up_budget_refuses_until_the_next_utc_day() -> None:
    clock = Clock(NEAR_MIDNIGHT)
    made, _ = accounting(clock, tokens_per_user_per_day=100)
    await made.record(deps("alice"), "chat", TokenUsage(90, 20))  # crossed by 10
    with pytest.raises(BudgetExhausted) as refused:
        await made.admit(deps("alice"))
    assert refused.value.status == 429
    assert refused.value.code == "budget_exhausted"
    assert refused.value.retry_after == 60
    assert ("Retry-After", "60") in refused.value.headers
    assert refused.value.message == (
        "your budget of 100 tokens a day on this agent is used up for today (UTC); it renews"
        " in 60 seconds"
    )
    assert await made.admit(deps("bob")) == 100
    clock.now += 60
    assert await made.admit(deps("alice")) == 100


async def test_callers_without_a_principal_share_one_budget() -> None:
    made, _ = accounting(Clock(NEAR_MIDNIGHT), tokens_per_user_per_day=10)
    await made.record(deps(None), "a2a", TokenUsage(10, 0))
    with pytest.raises(BudgetExhausted):
        await made.admit(deps(None))
    rows = await made.ledger.query("billing", "2026-03-01", "2026-03-01")
    assert [(r.user, r.total_tokens, r.runs) for r in rows] == [("anonymous", 10, 1)]


async def test_the_agents_day_budget_counts_every_user() -> None:
    made, _ = accounting(Clock(NEAR_MIDNIGHT), tokens_per_day=100)
    await made.record(deps("alice"), "chat", TokenUsage(60, 0))
    await made.record(deps("bob"), "chat", TokenUsage(40, 0))
    with pytest.raises(BudgetExhausted, match="this agent's budget of 100 tokens a day"):
        await made.admit(deps("carol"))


async def test_recorded_runs_reach_the_ledger_and_the_metrics() -> None:
    made, registry = accounting(Clock(NEAR_MIDNIGHT))
    await made.record(deps("alice"), "chat", TokenUsage(7, 3))
    await made.record(deps("alice"), "a2a", TokenUsage(1, 1))
    (row,) = await made.ledger.query("billing", "2026-03-01", "2026-03-01")
    assert (row.input_tokens, row.output_tokens, row.total_tokens, row.runs) == (8, 4, 12, 2)
    item = UsageItem.model_validate(row.wire())
    assert (item.agent, item.user, item.day, item.totalTokens) == (
        "billing",
        "alice",
        "2026-03-01",
        12,
    )
    sample = registry.get_sample_value
    assert sample("kaos_agent_tokens_total", {"agent": "billing", "kind": "input"}) == 8
    assert sample("kaos_agent_tokens_total", {"agent": "billing", "kind": "output"}) == 4


async def test_a_failing_ledger_loses_the_count_not_the_answer() -> None:
    class Broken(MemoryLedger):
        async def add(self, *args: object) -> None:  # type: ignore[override]
            raise RuntimeError("the usage ledger is not started")

    made, registry = accounting(Clock(NEAR_MIDNIGHT), Broken())
    await made.record(deps("alice"), "chat", TokenUsage(1, 1))
    assert registry.get_sample_value("kaos_agent_usage_write_failures_total") == 1


async def test_the_memory_ledger_is_bounded_and_swept() -> None:
    ledger = MemoryLedger(max_rows=3)
    for day in ("2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"):
        await ledger.add("a", "u", day, 1, 1)
    rows = await ledger.query("a", "2026-01-01", "2026-12-31")
    assert [r.day for r in rows] == ["2026-01-02", "2026-01-03", "2026-01-04"]
    await ledger.sweep("2026-01-04")
    assert [r.day for r in await ledger.query("a", "2026-01-01", "2026-12-31")] == ["2026-01-04"]


def test_the_query_takes_days_and_a_user() -> None:
    now = NEAR_MIDNIGHT
    assert parse_query(MultiDict(), now) == parse_query(
        MultiDict(since="2026-01-31", until="2026-03-01"), now
    )
    query = parse_query(MultiDict(since="2026-02-01", until="2026-02-28", user="alice"), now)
    assert (query.since, query.until, query.user) == ("2026-02-01", "2026-02-28", "alice")


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"since": "yesterday"}, "since must be a date"),
        ({"until": "2026-02-30"}, "until must be a date"),
        ({"since": "20260101"}, "since must be a date"),
        ({"since": "2026-03-02", "until": "2026-03-01"}, "since must not be after until"),
        ({"colour": "blue"}, "unknown query parameter 'colour'"),
        ({"user": ""}, "user"),
        ({"user": "a\x00b"}, "user"),
    ],
)
def test_a_bad_query_is_refused(params: dict[str, str], says: str) -> None:
    with pytest.raises(InvalidQuery, match=says) as refused:
        parse_query(MultiDict(params), NEAR_MIDNIGHT)
    assert refused.value.status == 400


def test_a_parameter_given_twice_is_refused() -> None:
    with pytest.raises(InvalidQuery, match="more than once"):
        parse_query(MultiDict([("user", "a"), ("user", "b")]), NEAR_MIDNIGHT)
