"""An Agent's token budgets in its pod: ``config.taskConfig.maxTokens`` and
``spec.budgets`` as the variables the agent reads (and reads back as the same numbers),
nothing written when they are absent, and what the schema refuses."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_agent.settings import AgentSettings
from kaos_operator.desired import AgentContext, desired_agent_objects
from pydantic import ValidationError

from tests.support.operator_objects import IMAGES, OPEN, agent, by_kind

NAMES = ("TASK_MAX_TOKENS", "AGENT_BUDGET_TOKENS_PER_DAY", "AGENT_BUDGET_TOKENS_PER_USER_PER_DAY")


def env(**spec: Any) -> dict[str, str]:
    ctx = AgentContext(
        images=IMAGES, posture=OPEN, model_api_url="http://llm.ns.svc:4000", model_name="m"
    )
    dep = by_kind(desired_agent_objects(agent("a1", **spec), ctx))["Deployment"]
    (main,) = dep["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in main["env"]}


def test_budgets_become_the_variables_the_agent_reads() -> None:
    written = env(
        config={"taskConfig": {"maxTokens": 5000}},
        budgets={"tokensPerDay": 2_000_000, "tokensPerUserPerDay": 100_000},
    )
    assert {n: written[n] for n in NAMES} == {
        "TASK_MAX_TOKENS": "5000",
        "AGENT_BUDGET_TOKENS_PER_DAY": "2000000",
        "AGENT_BUDGET_TOKENS_PER_USER_PER_DAY": "100000",
    }
    tokens = AgentSettings.from_env(written).tokens
    assert (tokens.max_tokens, tokens.tokens_per_day, tokens.tokens_per_user_per_day) == (
        5000,
        2_000_000,
        100_000,
    )


def test_absent_budgets_write_nothing() -> None:
    assert not set(NAMES) & set(env())
    only_users = env(budgets={"tokensPerUserPerDay": 10})
    assert [n for n in NAMES if n in only_users] == ["AGENT_BUDGET_TOKENS_PER_USER_PER_DAY"]
    tokens = AgentSettings.from_env(env()).tokens
    assert (tokens.max_tokens, tokens.tokens_per_day, tokens.tokens_per_user_per_day) == (
        None,
        None,
        None,
    )


@pytest.mark.parametrize(
    "spec",
    [
        {"budgets": {"tokensPerDay": 0}},
        {"budgets": {"tokensPerUserPerDay": -1}},
        {"config": {"taskConfig": {"maxTokens": 0}}},
    ],
)
def test_the_schema_refuses_budgets_that_mean_nothing(spec: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        agent("a1", **spec)
