"""The Agent reconciler and its schedules over a fake context: the CronJobs applied, and
status.schedules written with the rest of the status from the cached CronJob and Job."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaos_operator.reconcilers import Outcome, build_reconcilers
from kaos_operator.reconcilers.agent import SCHEDULE_RECHECK_SECONDS

from tests.support.operator_context import FakeContext, raw, ready_model_api

T0 = datetime(2026, 12, 6, 14, 36, 0, tzinfo=UTC)
DAILY = {"name": "daily", "cron": "35 14 * * *", "message": "report"}
SCHEDULED = "2026-12-06T14:35:00Z"
JOB = "a1-daily-29942795"  # the CronJob controller's name for the 14:35 run


def setup(**spec: Any) -> tuple[FakeContext, Any]:
    ctx = FakeContext()
    ready_model_api(ctx)
    ctx.add(raw("Agent", "a1", {"modelAPI": "llm", "schedules": [DAILY], **spec}))
    return ctx, build_reconcilers(ctx, clock=lambda: T0)["Agent"]


def schedules(ctx: FakeContext) -> list[dict[str, Any]]:
    return list(ctx.status_of("Agent", "ns", "a1").get("schedules") or [])


async def test_cronjob_applied_and_status_follows_its_job() -> None:
    ctx, rec = setup()
    assert await rec.reconcile("ns", "a1") == Outcome.OK
    cj = ctx.objects[("CronJob", "ns", "a1-daily")]
    assert cj["spec"]["schedule"] == "35 14 * * *"
    assert schedules(ctx) == [{"name": "daily", "lastResult": "none"}]

    # The controller started the 14:35 run; it is still active.
    cj["status"] = {"lastScheduleTime": SCHEDULED, "active": [{"name": JOB}]}
    ctx.objects[("Job", "ns", JOB)] = {"metadata": {"name": JOB}, "status": {}}
    assert await rec.reconcile("ns", "a1") == Outcome.OK
    assert schedules(ctx) == [
        {"name": "daily", "lastResult": "none", "lastScheduleTime": SCHEDULED}
    ]
    assert rec.take_recheck("ns", "a1") is None

    # The run failed: the Job says so, the CronJob no longer lists it.
    cj["status"] = {"lastScheduleTime": SCHEDULED}
    ctx.objects[("Job", "ns", JOB)]["status"] = {
        "conditions": [{"type": "Failed", "status": "True"}]
    }
    assert await rec.reconcile("ns", "a1") == Outcome.OK
    assert schedules(ctx)[0]["lastResult"] == "failed"


async def test_a_finished_run_not_yet_cached_is_looked_at_again() -> None:
    ctx, rec = setup()
    assert await rec.reconcile("ns", "a1") == Outcome.OK
    ctx.objects[("CronJob", "ns", "a1-daily")]["status"] = {"lastScheduleTime": SCHEDULED}
    ctx.objects[("Job", "ns", JOB)] = {"metadata": {"name": JOB}, "status": {}}
    assert await rec.reconcile("ns", "a1") == Outcome.OK
    assert rec.take_recheck("ns", "a1") == SCHEDULE_RECHECK_SECONDS


async def test_removed_schedules_leave_no_cronjob_and_no_status() -> None:
    ctx, rec = setup()
    assert await rec.reconcile("ns", "a1") == Outcome.OK
    ctx.add(raw("Agent", "a1", {"modelAPI": "llm"}))
    assert await rec.reconcile("ns", "a1") == Outcome.OK
    last_apply = ctx.applies[-1][1]
    assert not any(o["kind"] == "CronJob" for o in last_apply)
    assert schedules(ctx) == []
