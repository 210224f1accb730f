"""An Agent's webhook triggers in its pod: the list in the environment, each secret a file
of one read-only projected volume, never a value in the environment; and what the schema
refuses."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kaos_agent.settings import AgentSettings
from kaos_operator.desired import AgentContext, desired_agent_objects
from kaos_operator.desired.agent_triggers import TRIGGERS_DIR
from pydantic import ValidationError

from tests.support.operator_objects import IMAGES, OPEN, agent, by_kind

TRIGGERS = [
    {"name": "push", "secret": {"name": "gh", "key": "hmac"}, "message": "Review {{ head }}"},
    {"name": "alert", "secret": {"name": "pager", "key": "k"}, "message": "x", "maxPerMinute": 5},
]


def ctx() -> AgentContext:
    return AgentContext(
        images=IMAGES, posture=OPEN, model_api_url="http://llm.ns.svc:4000", model_name="m"
    )


def pod(**spec: Any) -> dict[str, Any]:
    dep = by_kind(desired_agent_objects(agent("a1", **spec), ctx()))["Deployment"]
    return dict(dep["spec"]["template"]["spec"])


def test_triggers_are_listed_and_their_secrets_are_files() -> None:
    spec = pod(triggers=TRIGGERS)
    (main,) = spec["containers"]
    env = {e["name"]: e for e in main["env"]}
    assert json.loads(env["AGENT_TRIGGERS"]["value"]) == [
        {"name": "push", "message": "Review {{ head }}", "maxPerMinute": 60},
        {"name": "alert", "message": "x", "maxPerMinute": 5},
    ]
    assert env["AGENT_TRIGGER_SECRETS_DIR"]["value"] == TRIGGERS_DIR
    # No secret reaches the environment, by value or by reference.
    assert not any("valueFrom" in e for e in main["env"] if "TRIGGER" in e["name"])
    (volume,) = [v for v in spec["volumes"] if v["name"] == "triggers"]
    assert volume["projected"]["sources"] == [
        {"secret": {"name": "gh", "items": [{"key": "hmac", "path": "push"}]}},
        {"secret": {"name": "pager", "items": [{"key": "k", "path": "alert"}]}},
    ]
    (mount,) = [m for m in main["volumeMounts"] if m["name"] == "triggers"]
    assert mount == {"name": "triggers", "mountPath": TRIGGERS_DIR, "readOnly": True}


def test_the_agent_reads_the_list_the_operator_writes(tmp_path: Any) -> None:
    env = {
        e["name"]: e["value"]
        for e in pod(triggers=TRIGGERS)["containers"][0]["env"]
        if "TRIGGER" in e["name"] or e["name"].startswith("MODEL_")
    }
    for name in ("push", "alert"):
        (tmp_path / name).write_text("s3cret\n")
    env["AGENT_TRIGGER_SECRETS_DIR"] = str(tmp_path)
    settings = AgentSettings.from_env(env)
    assert [(t.name, t.max_per_minute) for t in settings.webhooks.triggers] == [
        ("push", 60),
        ("alert", 5),
    ]


def test_without_triggers_nothing_is_added() -> None:
    spec = pod()
    env = {e["name"] for e in spec["containers"][0]["env"]}
    assert not {"AGENT_TRIGGERS", "AGENT_TRIGGER_SECRETS_DIR"} & env
    assert not any(v["name"] == "triggers" for v in spec.get("volumes") or [])


@pytest.mark.parametrize(
    ("triggers", "message"),
    [
        ([TRIGGERS[0], {**TRIGGERS[1], "name": "push"}], "trigger names must be unique"),
        ([{**TRIGGERS[0], "name": "Push!"}], "name"),
        ([{**TRIGGERS[0], "maxPerMinute": 0}], "maxPerMinute"),
        ([{**TRIGGERS[0], "message": "x" * 8001}], "message"),
        ([{"name": "push", "message": "x"}], "secret"),
    ],
)
def test_the_schema_refuses_bad_triggers(triggers: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        agent("a1", triggers=triggers)
