"""An Agent's schedules as its desired objects say: one CronJob each (shape, name
shortening, pruning by absence), the identity of its runs with security on and off, the
callers file and NetworkPolicy that admit the agent's own runs, and status.schedules
mapped from CronJob and Job objects as the API server writes them."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_core.auth import names as auth
from kaos_core.crds.agent import Agent
from kaos_core.crds.common import Telemetry
from kaos_operator.desired import AgentContext, desired_agent_objects
from kaos_operator.desired.agent_schedules import (
    CRONJOB_NAME_MAX,
    cronjob_name,
    latest_job_name,
    schedule_status,
    schedules_status,
)

from tests.support.operator_objects import IMAGES, OPEN, SECURED, agent, by_kind

DAILY = {"name": "daily", "cron": "0 9 * * 1-5", "message": "summarise the day"}


def ctx(**kw: Any) -> AgentContext:
    base: dict[str, Any] = {
        "images": IMAGES,
        "posture": OPEN,
        "model_api_url": "http://llm.ns.svc:4000",
        "model_name": "m",
    }
    return AgentContext(**{**base, **kw})


def cronjobs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == "CronJob"}


def test_a_schedule_is_a_cronjob_the_agent_owns() -> None:
    a = agent("a1", schedules=[{**DAILY, "timeZone": "Europe/Paris"}])
    cj = cronjobs(desired_agent_objects(a, ctx()))["a1-daily"]
    assert cj["apiVersion"] == "batch/v1"
    owner = cj["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Agent", "a1", True)
    spec = cj["spec"]
    assert spec["schedule"] == "0 9 * * 1-5"
    assert spec["timeZone"] == "Europe/Paris"
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Forbid", False)
    assert spec["successfulJobsHistoryLimit"] == spec["failedJobsHistoryLimit"] == 3
    assert spec["startingDeadlineSeconds"] > 0
    job = spec["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0
    # The run's own budget (ten minutes without one) and a margin.
    assert job["activeDeadlineSeconds"] == 660
    pod = job["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["securityContext"]["runAsNonRoot"] is True
    (main,) = pod["containers"]
    assert main["image"] == IMAGES.agent
    assert main["command"] == ["python", "-m", "kaos_agent.invoke"]
    args = main["args"]
    assert args[args.index("--url") + 1] == "http://a1.ns.svc:8000"
    assert args[args.index("--session") + 1] == "schedule-daily"
    assert args[args.index("--message") + 1] == "summarise the day"
    assert args[args.index("--timeout") + 1] == "600"
    assert main["resources"]["limits"]["memory"] == "128Mi"
    assert main["securityContext"]["allowPrivilegeEscalation"] is False
    # Open posture: no identity to present, no ServiceAccount of the Agent's (none exists).
    assert "--token-file" not in args and "serviceAccountName" not in pod
    assert pod["automountServiceAccountToken"] is False


def test_the_runs_pods_are_not_the_agents_pods() -> None:
    a = agent("a1", schedules=[DAILY])
    objs = desired_agent_objects(a, ctx())
    service = by_kind(objs)["Service"]
    cj = cronjobs(objs)["a1-daily"]
    pod_labels = cj["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    job_labels = cj["spec"]["jobTemplate"]["metadata"]["labels"]
    selector = service["spec"]["selector"]
    assert not selector.items() <= pod_labels.items()
    # The operator's watch (managed-by) sees the Jobs; the label names the schedule.
    assert job_labels["app.kubernetes.io/managed-by"] == "kaos-operator"
    assert job_labels["kaos.tools/schedule"] == "daily"


def test_the_runs_pods_go_where_the_agents_pods_go() -> None:
    placement = {
        "nodeSelector": {"pool": "agents"},
        "tolerations": [{"key": "dedicated", "value": "agents", "effect": "NoSchedule"}],
        "priorityClassName": "agents",
        "imagePullSecrets": [{"name": "registry"}],
    }
    pod_override = {
        **placement,
        "labels": {"team": "a"},
        "annotations": {"example.com/note": "x"},
        "volumes": [{"name": "scratch", "emptyDir": {}}],
    }
    a = agent("a1", schedules=[DAILY], pod=pod_override)
    objs = desired_agent_objects(a, ctx())
    template = cronjobs(objs)["a1-daily"]["spec"]["jobTemplate"]["spec"]["template"]
    for field, value in placement.items():
        assert template["spec"][field] == value
    # The workload's own pod metadata and volumes stay on the agent's pods.
    assert "team" not in template["metadata"]["labels"]
    assert "annotations" not in template["metadata"] and "volumes" not in template["spec"]
    agent_pod = by_kind(objs)["Deployment"]["spec"]["template"]
    assert agent_pod["spec"]["nodeSelector"] == {"pool": "agents"}
    assert agent_pod["metadata"]["labels"]["team"] == "a"


def test_wall_time_budget_and_policy_reach_the_job() -> None:
    a = agent(
        "a1",
        config={"taskConfig": {"maxWallTimeSeconds": 120}},
        schedules=[{**DAILY, "concurrencyPolicy": "Replace", "suspend": True}],
    )
    spec = cronjobs(desired_agent_objects(a, ctx()))["a1-daily"]["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Replace", True)
    assert "timeZone" not in spec
    job = spec["jobTemplate"]["spec"]
    assert job["activeDeadlineSeconds"] == 180
    args = job["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--timeout") + 1] == "120"


def test_secured_runs_present_the_agents_own_token() -> None:
    a = agent("a1", schedules=[DAILY])
    pod = cronjobs(desired_agent_objects(a, ctx(posture=SECURED)))["a1-daily"]["spec"][
        "jobTemplate"
    ]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "a1"
    assert pod["automountServiceAccountToken"] is False
    (volume,) = pod["volumes"]
    (source,) = volume["projected"]["sources"]
    # The peers' audience only: the run calls the agent, nothing else.
    assert source["serviceAccountToken"]["audience"] == auth.AGENT_AUDIENCE
    main = pod["containers"][0]
    assert main["volumeMounts"][0]["mountPath"] == auth.TOKEN_DIR
    assert main["args"][main["args"].index("--token-file") + 1] == auth.AGENT_TOKEN_PATH


def _callers(objs: list[dict[str, Any]]) -> str:
    return str(by_kind(objs)["ConfigMap"]["data"][auth.CALLERS_FILE])


def test_the_callers_file_lists_the_agent_itself_only_with_schedules() -> None:
    peers = ctx(posture=SECURED, callers=("b",))
    without = _callers(desired_agent_objects(agent("a1"), peers))
    assert "kaos://agent/ns/b" in without and "kaos://agent/ns/a1" not in without
    scheduled = _callers(desired_agent_objects(agent("a1", schedules=[DAILY]), peers))
    assert "kaos://agent/ns/b" in scheduled and "kaos://agent/ns/a1" in scheduled


def test_a_closed_agent_admits_its_runs_pods() -> None:
    closed = {"expose": False}
    a = agent("a1", agentNetwork=closed, schedules=[DAILY])
    policy = by_kind(desired_agent_objects(a, ctx(posture=SECURED)))["NetworkPolicy"]
    peers = [p for rule in policy["spec"]["ingress"] for p in rule.get("from", [])]
    labels = [p["podSelector"].get("matchLabels") for p in peers]
    assert {"app.kubernetes.io/name": "agent-schedule", "app.kubernetes.io/instance": "a1"} in (
        labels
    )
    assert all(
        rule["ports"] == [{"protocol": "TCP", "port": 8000}] for rule in policy["spec"]["ingress"]
    )
    # Without schedules the policy is what it was.
    plain = by_kind(desired_agent_objects(agent("a1", agentNetwork=closed), ctx(posture=SECURED)))
    assert len(plain["NetworkPolicy"]["spec"]["ingress"]) == 0


def test_removing_a_schedule_leaves_its_cronjob_out_to_be_pruned() -> None:
    two = agent("a1", schedules=[DAILY, {**DAILY, "name": "hourly", "cron": "@hourly"}])
    assert set(cronjobs(desired_agent_objects(two, ctx()))) == {"a1-daily", "a1-hourly"}
    one = agent("a1", schedules=[{**DAILY, "name": "hourly", "cron": "@hourly"}])
    assert set(cronjobs(desired_agent_objects(one, ctx()))) == {"a1-hourly"}
    assert cronjobs(desired_agent_objects(agent("a1"), ctx())) == {}


def test_long_names_are_shortened_with_a_hash() -> None:
    assert cronjob_name("a1", "daily") == "a1-daily"
    agent_name, left, right = "a" * 40, "x" * 30 + "-one", "x" * 30 + "-two"
    short_l, short_r = cronjob_name(agent_name, left), cronjob_name(agent_name, right)
    assert len(short_l) <= CRONJOB_NAME_MAX and len(short_r) <= CRONJOB_NAME_MAX
    assert short_l != short_r
    assert short_l.startswith(agent_name + "-x")
    assert cronjob_name(agent_name, left) == short_l  # stable
    # Exactly at the limit: kept as written.
    exact = cronjob_name("b" * 30, "c" * 21)
    assert exact == "b" * 30 + "-" + "c" * 21 and len(exact) == CRONJOB_NAME_MAX


# -- status --------------------------------------------------------------------------


def cronjob_obj(name: str, **status: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": status}


def job_obj(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {"status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}


def test_the_latest_job_is_named_after_the_scheduled_minute() -> None:
    cj = cronjob_obj("a1-daily", lastScheduleTime="2026-12-06T14:35:00Z")
    assert latest_job_name(cj) == "a1-daily-29942795"
    assert latest_job_name(cronjob_obj("a1-daily")) is None


@pytest.mark.parametrize(
    ("job", "cj_status", "previous", "result"),
    [
        (None, {}, None, "none"),
        (job_obj(("Complete", "True")), {"lastScheduleTime": "T1"}, None, "succeeded"),
        (job_obj(("Failed", "True")), {"lastScheduleTime": "T1"}, None, "failed"),
        # Still running: the last finished run's result stays.
        (job_obj(), {"lastScheduleTime": "T2"}, {"lastResult": "failed"}, "failed"),
        (job_obj(("Complete", "False")), {"lastScheduleTime": "T2"}, None, "none"),
        # The Job is gone but the CronJob says the latest run completed.
        (None, {"lastScheduleTime": "T2", "lastSuccessfulTime": "T3"}, None, "succeeded"),
    ],
)
def test_last_result_from_the_job_and_the_cronjob(
    job: dict[str, Any] | None,
    cj_status: dict[str, Any],
    previous: dict[str, Any] | None,
    result: str,
) -> None:
    entry = schedule_status("daily", cronjob_obj("a1-daily", **cj_status), job, previous)
    assert entry["lastResult"] == result
    assert entry.get("lastScheduleTime") == cj_status.get("lastScheduleTime")


def test_schedules_status_reads_each_cronjob_and_its_latest_job() -> None:
    a: Agent = agent("a1", schedules=[DAILY, {**DAILY, "name": "weekly", "cron": "@weekly"}])
    scheduled = "2026-12-06T14:35:00Z"
    cjs = {
        "a1-daily": cronjob_obj(
            "a1-daily", lastScheduleTime=scheduled, lastSuccessfulTime="2026-12-06T14:35:09Z"
        )
    }
    jobs = {"a1-daily-29942795": job_obj(("Complete", "True"))}
    entries, lagging = schedules_status(a, cjs.get, jobs.get, [])
    assert entries == [
        {
            "name": "daily",
            "lastResult": "succeeded",
            "lastScheduleTime": scheduled,
            "lastSuccessfulTime": "2026-12-06T14:35:09Z",
        },
        {"name": "weekly", "lastResult": "none"},
    ]
    assert not lagging
    # The CronJob has no active run but the cached Job has not finished: look again.
    jobs["a1-daily-29942795"] = job_obj()
    cjs["a1-daily"] = cronjob_obj("a1-daily", lastScheduleTime=scheduled)
    entries, lagging = schedules_status(
        a, cjs.get, jobs.get, [{"name": "daily", "lastResult": "failed"}]
    )
    assert lagging and entries[0]["lastResult"] == "failed"
    # An active run is no reason to look again (its end changes the CronJob).
    cjs["a1-daily"] = cronjob_obj("a1-daily", lastScheduleTime=scheduled, active=[{"name": "x"}])
    assert not schedules_status(a, cjs.get, jobs.get, [])[1]


def _run_env(a: Agent, context: AgentContext) -> dict[str, str]:
    cj = cronjobs(desired_agent_objects(a, context))["a1-daily"]
    (main,) = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e["value"] for e in main["env"]}


def test_runs_are_traced_as_the_agent_is_under_the_cronjobs_name() -> None:
    traced = ctx(telemetry=Telemetry(endpoint="http://jaeger.obs:4318", sampling_ratio=0.5))
    env = _run_env(agent("a1", schedules=[DAILY]), traced)
    deployment = by_kind(desired_agent_objects(agent("a1", schedules=[DAILY]), traced))
    (container,) = deployment["Deployment"]["spec"]["template"]["spec"]["containers"]
    agent_env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["OTEL_SERVICE_NAME"] == "a1-daily"
    assert agent_env["OTEL_SERVICE_NAME"] == "a1"
    # Everything else as the agent's pods have it: endpoint, sampler, resource.
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER_ARG",
                 "OTEL_RESOURCE_ATTRIBUTES"):  # fmt: skip
        assert env[name] == agent_env[name], name
    assert env["PYTHONUNBUFFERED"] == "1"


def test_runs_are_not_traced_when_the_agent_is_not() -> None:
    off = {"telemetry": {"endpoint": "http://jaeger.obs:4318", "enabled": False}}
    traced = ctx(telemetry=Telemetry(endpoint="http://jaeger.obs:4318"))
    for a, context in ((agent("a1", schedules=[DAILY]), ctx()),
                       (agent("a1", schedules=[DAILY], **off), traced)):  # fmt: skip
        assert not [n for n in _run_env(a, context) if n.startswith("OTEL_")]
