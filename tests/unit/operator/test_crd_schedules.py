"""spec.schedules as the model checks it (the operator refuses what the schema lets
through: a cron field out of range, a time zone that does not exist) and as the
generated schema carries it (the rules the API server runs: tests/e2e/operator)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from kaos_core.crds.agent import Agent, AgentSpec
from kaos_core.crds.generate import crd_document
from kaos_core.crds.schedules import CRON_PATTERN, SCHEDULES_MAX, check_cron
from pydantic import ValidationError

DAILY = {"name": "daily", "cron": "0 9 * * 1-5", "message": "summarise the day"}


def spec(*schedules: dict[str, Any]) -> AgentSpec:
    return AgentSpec.model_validate({"modelAPI": "llm", "schedules": list(schedules)})


def refusal(*schedules: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        spec(*schedules)
    return str(info.value)


def test_defaults() -> None:
    (s,) = spec(DAILY).schedules
    assert (s.concurrency_policy, s.suspend, s.time_zone) == ("Forbid", False, None)
    assert spec().schedules == []


@pytest.mark.parametrize(
    "cron",
    [
        "* * * * *",
        "*/5 0-23/2 1,15 jan-mar *",
        "0 9 * * MON-FRI",
        "@hourly",
        "@yearly",
        "0 0 1 12 0",
    ],
)
def test_valid_crons(cron: str) -> None:
    assert check_cron(cron) == cron
    assert re.fullmatch(CRON_PATTERN, cron)


@pytest.mark.parametrize(
    ("cron", "fragment"),
    [
        ("* * * *", "cron must be five fields"),
        ("* * * * * *", "cron must be five fields"),
        ("TZ=UTC * * * * *", "cron must be five fields"),
        ("@every 5m", "cron must be five fields"),
        ("60 * * * *", "cron minute field: 60 is outside 0-59"),
        ("* 24 * * *", "cron hour field: 24 is outside 0-23"),
        ("* * 0 * *", "cron day-of-month field: 0 is outside 1-31"),
        ("* * * 13 *", "cron month field: 13 is outside 1-12"),
        ("* * * * 7", "cron day-of-week field: 7 is outside 0-6"),
        ("5-1 * * * *", "the range 5-1 runs backwards"),
        ("*/0 * * * *", "a step must be at least 1"),
        ("* * * * funday", "'funday' is not a number or a name"),
    ],
)
def test_bad_crons_say_which_field(cron: str, fragment: str) -> None:
    assert fragment in refusal({**DAILY, "cron": cron})


def test_time_zone_must_exist() -> None:
    assert spec({**DAILY, "timeZone": "Europe/Paris"}).schedules[0].time_zone == "Europe/Paris"
    message = refusal({**DAILY, "timeZone": "Mars/Olympus_Mons"})
    assert "timeZone 'Mars/Olympus_Mons' is not a time zone of the IANA database" in message
    assert "pattern" in refusal({**DAILY, "timeZone": "../etc/passwd"})


def test_names_unique_dns_labels_and_bounded() -> None:
    message = refusal(DAILY, {**DAILY, "cron": "@hourly"})
    assert "schedule names must be unique: daily repeated" in message
    assert "pattern" in refusal({**DAILY, "name": "Daily"})
    too_many = [{**DAILY, "name": f"s{i}"} for i in range(SCHEDULES_MAX + 1)]
    assert "at most 20" in refusal(*too_many)
    assert "at most 10000" in refusal({**DAILY, "message": "x" * 10_001})
    assert "at least 1" in refusal({**DAILY, "message": ""})
    assert "concurrencyPolicy" in refusal({**DAILY, "concurrencyPolicy": "Sometimes"})


def test_the_schema_carries_the_rules_the_api_server_runs() -> None:
    crd = crd_document(Agent.info)
    props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    field = props["spec"]["properties"]["schedules"]
    assert field["maxItems"] == SCHEDULES_MAX
    rules = [v["rule"] for v in field["x-kubernetes-validations"]]
    assert rules == ["self.all(s, self.exists_one(t, t.name == s.name))"]
    item = field["items"]
    (cron_rule,) = item["x-kubernetes-validations"]
    assert cron_rule["rule"] == f"self.cron.matches(r'{CRON_PATTERN}')"
    assert item["properties"]["message"]["maxLength"] == 10_000
    status = props["status"]["properties"]["schedules"]["items"]["properties"]
    assert status["lastResult"]["enum"] == ["succeeded", "failed", "none"]
