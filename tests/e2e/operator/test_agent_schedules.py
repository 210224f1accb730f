"""An Agent's spec.schedules on the real API server and its real CronJob controller: the
schema refusing what cannot run, the CronJob the operator applies, a Job started by the
controller at the next minute (its pod lands on kwok, whose stages complete Jobs' pods),
the run's outcome on the Agent's status, and the CronJob pruned with its schedule."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_core.crds.reasons import INVALID_SPEC
from kaos_operator.kube import CRONJOBS, JOBS, KubeClient, Obj, PermanentError

from tests.e2e.operator.helpers import AGENTS, condition, create, eventually, proxy_api
from tests.support.procs import ServiceProcess

pytestmark = pytest.mark.cluster

TICK = {"name": "tick", "cron": "* * * * *", "message": "tick"}


def agent_spec(*schedules: dict[str, Any]) -> dict[str, Any]:
    return {"modelAPI": "llm", "waitForDependencies": False, "schedules": list(schedules)}


async def refused(kube: KubeClient, ns: str, spec: dict[str, Any]) -> str:
    with pytest.raises(PermanentError) as info:
        await create(kube, ns, "Agent", "bad", spec)
    assert info.value.status == 422, info.value
    return info.value.message


@pytest.mark.parametrize(
    ("schedules", "message"),
    [
        ([{**TICK, "cron": "* * * *"}], "cron must be five fields"),
        ([{**TICK, "cron": "TZ=UTC * * * * *"}], "cron must be five fields"),
        ([TICK, {**TICK, "message": "again"}], "schedule names must be unique"),
        ([{**TICK, "timeZone": "not a zone"}], "spec.schedules[0].timeZone"),
        ([{**TICK, "message": ""}], "spec.schedules[0].message"),
        ([{**TICK, "name": f"s{i}"} for i in range(21)], "spec.schedules"),
    ],
)
async def test_the_schema_refuses_bad_schedules(
    kube: KubeClient, k8s_namespace: str, schedules: list[dict[str, Any]], message: str
) -> None:
    assert message in await refused(kube, k8s_namespace, agent_spec(*schedules))


async def test_an_unknown_time_zone_is_an_invalid_spec(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    # The schema admits the name's shape; the operator knows the zone does not exist.
    await create(kube, ns, "Agent", "a1", agent_spec({**TICK, "timeZone": "Mars/Olympus"}))

    async def probe() -> dict[str, Any] | None:
        ready = condition(await kube.get(AGENTS, ns, "a1"), "Ready")
        return ready if ready and ready["reason"] == INVALID_SPEC else None

    ready = await eventually(probe, within=60, what="Ready=False InvalidSpec")
    assert "not a time zone of the IANA database" in ready["message"]
    assert await kube.get(CRONJOBS, ns, "a1-tick") is None


async def test_a_schedule_runs_at_its_minute_and_is_pruned_with_it(
    kube: KubeClient, k8s_namespace: str, kaos_operator: ServiceProcess
) -> None:
    ns = k8s_namespace
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    long_name = "a-schedule-whose-name-is-long-enough-to-shorten"
    await create(
        kube,
        ns,
        "Agent",
        "a1",
        agent_spec(TICK, {**TICK, "name": long_name, "suspend": True, "timeZone": "Europe/Paris"}),
    )

    async def cronjobs() -> dict[str, Obj] | None:
        doc = await kube.list(CRONJOBS, ns)
        found = {item["metadata"]["name"]: item for item in doc.get("items", [])}
        return found if len(found) == 2 else None

    found = await eventually(cronjobs, within=90, what="the two CronJobs")
    tick = found.pop("a1-tick")
    (shortened,) = found
    assert len(shortened) <= 52 and shortened.startswith("a1-a-schedule-whose")
    assert found[shortened]["spec"]["suspend"] is True
    assert found[shortened]["spec"]["timeZone"] == "Europe/Paris"
    spec = tick["spec"]
    assert spec["schedule"] == "* * * * *" and spec["concurrencyPolicy"] == "Forbid"
    assert spec["successfulJobsHistoryLimit"] == 3 and spec["failedJobsHistoryLimit"] == 3
    owner = tick["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("Agent", "a1")
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["containers"][0]["command"] == ["python", "-m", "kaos_agent.invoke"]

    # The cluster's CronJob controller starts a Job at the next minute (at most ~60 s).
    async def job() -> Obj | None:
        doc = await kube.list(JOBS, ns, label_selector="kaos.tools/schedule=tick")
        items = doc.get("items") or []
        return items[0] if items else None

    started = await eventually(job, within=100, what="a Job of the schedule")
    assert started["metadata"]["ownerReferences"][0]["name"] == "a1-tick"
    assert started["spec"]["backoffLimit"] == 0
    # The suspended schedule started nothing.
    doc = await kube.list(JOBS, ns, label_selector=f"kaos.tools/schedule={long_name}")
    assert not doc.get("items")

    # kwok completes the Job's pod; the run's outcome reaches the Agent's status.
    async def reported() -> dict[str, Any] | None:
        status = (await kube.get(AGENTS, ns, "a1") or {}).get("status") or {}
        entries = {e["name"]: e for e in status.get("schedules") or []}
        tick_entry = entries.get("tick") or {}
        return entries if tick_entry.get("lastResult") == "succeeded" else None

    entries = await eventually(reported, within=90, what="tick's last result on the Agent")
    live = await kube.get(CRONJOBS, ns, "a1-tick")
    assert live is not None
    assert entries["tick"]["lastScheduleTime"] == live["status"]["lastScheduleTime"]
    assert entries["tick"]["lastSuccessfulTime"]
    assert entries[long_name] == {"name": long_name, "lastResult": "none"}

    # Removing the schedules prunes their CronJobs.
    await kube.request(
        "PATCH",
        AGENTS.path(ns, "a1"),
        body={"spec": {"schedules": []}},
        content_type="application/merge-patch+json",
    )

    async def pruned() -> bool:
        return not (await kube.list(CRONJOBS, ns)).get("items")

    await eventually(pruned, within=60, what="the CronJobs pruned")
