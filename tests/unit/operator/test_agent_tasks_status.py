"""Condition TasksShared of an Agent: whether every replica answers for every task.

Replicas that keep their tasks in their own memory are run as asked (Agents that exist
do), with TasksShared=False and one Warning Event saying what it costs and what to set.
"""

from __future__ import annotations

from typing import Any

from kaos_core.crds import reasons
from kaos_core.crds.reasons import (
    EXTERNAL_TASK_STORE,
    SINGLE_REPLICA,
    TASKS_IN_POD_MEMORY,
    TASKS_SHARED,
)
from kaos_operator.reconcilers import Outcome, build_reconcilers

from tests.support.operator_context import FakeContext, raw, ready_model_api

EXTERNAL = {"type": "external", "connectionSecret": {"name": "pg"}}


def setup(**spec: Any) -> FakeContext:
    ctx = FakeContext()
    ready_model_api(ctx)
    ctx.add(raw("Agent", "a1", {"modelAPI": "llm", **spec}))
    return ctx


async def reconcile(ctx: FakeContext) -> dict[str, Any]:
    rec = build_reconcilers(ctx)["Agent"]
    assert await rec.reconcile("ns", "a1") == Outcome.OK
    return ctx.status_of("Agent", "ns", "a1")


def shared(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == TASKS_SHARED)


def warnings(ctx: FakeContext) -> list[Any]:
    return [e for e in ctx.events if e.reason == TASKS_IN_POD_MEMORY]


async def test_memory_replicas_run_with_a_warning_once() -> None:
    ctx = setup(replicas=3)
    await reconcile(ctx)
    ctx.deployment_available("ns", "a1")
    status = await reconcile(ctx)
    cond = shared(status)
    assert (cond["status"], cond["reason"]) == ("False", TASKS_IN_POD_MEMORY)
    assert "3 replicas each keep their own tasks in memory" in cond["message"]
    # Run as asked: Ready, with its three replicas and their disruption budget.
    assert status["phase"] == reasons.PHASE_READY
    assert ctx.objects[("Deployment", "ns", "a1")]["spec"]["replicas"] == 3
    assert ("PodDisruptionBudget", "ns", "a1") in ctx.objects
    await reconcile(ctx)
    (event,) = warnings(ctx)
    assert event.type_ == "Warning" and event.message == cond["message"]


async def test_an_external_store_shares_them() -> None:
    ctx = setup(replicas=3, taskStore=EXTERNAL)
    cond = shared(await reconcile(ctx))
    assert (cond["status"], cond["reason"]) == ("True", EXTERNAL_TASK_STORE)
    assert not warnings(ctx)


async def test_one_replica_holds_every_task() -> None:
    ctx = setup()
    cond = shared(await reconcile(ctx))
    assert (cond["status"], cond["reason"]) == ("True", SINGLE_REPLICA)
    assert not warnings(ctx)


async def test_switching_to_external_clears_the_condition_and_warns_no_more() -> None:
    ctx = setup(replicas=2)
    await reconcile(ctx)
    ctx.resources[("Agent", "ns", "a1")]["spec"]["taskStore"] = EXTERNAL
    cond = shared(await reconcile(ctx))
    assert cond["status"] == "True"
    assert len(warnings(ctx)) == 1
