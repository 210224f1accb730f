"""An Agent's approval gates in its pod: ``spec.approvals`` as ``AGENT_APPROVALS``, read back
by the agent's own settings; nothing when absent; what the schema refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kaos_agent.settings import AgentSettings
from kaos_core.crds.agent import AgentSpec
from kaos_operator.desired import AgentContext, desired_agent_objects
from pydantic import ValidationError

from tests.support.operator_objects import IMAGES, OPEN, agent, by_kind

APPROVALS = {
    "rules": [{"mcpServer": "payments", "tools": ["charge", "refund"]}, {"peer": "billing"}],
    "timeoutSeconds": 120,
}


def env_of(**spec: Any) -> dict[str, str]:
    ctx = AgentContext(
        images=IMAGES, posture=OPEN, model_api_url="http://llm.ns.svc:4000", model_name="m"
    )
    dep = by_kind(desired_agent_objects(agent("a1", **spec), ctx))["Deployment"]
    (main,) = dep["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in main["env"]}


def test_the_rules_reach_the_pod_with_their_defaults_and_the_agent_reads_them() -> None:
    env = env_of(approvals=APPROVALS)
    assert json.loads(env["AGENT_APPROVALS"]) == {**APPROVALS, "onTimeout": "deny"}
    settings = AgentSettings.from_env(
        {"AGENT_NAME": "a1", "MODEL_API_URL": "http://x", "MODEL_NAME": "m", **env}
    )
    policy = settings.approvals.policy
    assert policy is not None and policy.timeout_seconds == 120 and policy.on_timeout == "deny"
    assert policy.gates_server("payments", "charge") and policy.gates_server("payments", "refund")
    assert not policy.gates_server("payments", "quote") and not policy.gates_server("x", "charge")
    assert policy.gates_peer("billing") and not policy.gates_peer("other")


def test_without_approvals_nothing_waits() -> None:
    assert "AGENT_APPROVALS" not in env_of()


@pytest.mark.parametrize(
    "approvals",
    [
        {"rules": []},
        {"rules": [{"mcpServer": "a", "peer": "b"}]},
        {"rules": [{}]},
        {"rules": [{"peer": "b", "tools": ["x"]}]},
        {"rules": [{"peer": "b"}], "timeoutSeconds": 59},
        {"rules": [{"peer": "b"}], "timeoutSeconds": 604_801},
        {"rules": [{"peer": "b"}], "onTimeout": "maybe"},
        {"rules": [{"peer": "b"}] * 33},
    ],
)
def test_the_schema_refuses_rules_that_name_no_single_target_or_bad_bounds(
    approvals: dict[str, Any],
) -> None:
    with pytest.raises(ValidationError):
        AgentSpec.model_validate({"modelAPI": "m", "approvals": approvals})
