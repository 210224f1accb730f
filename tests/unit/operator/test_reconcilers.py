"""Every kind's reconciler on the shared template, against a fake context (no cluster).

Status is written exactly once per reconcile on each path: success, temporary error,
permanent error and invalid object. A permanent error and an invalid object are not
retried; counted through the real work queue, driven by a manual clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from kaos_core.crds import reasons
from kaos_operator.kube import PermanentError, TemporaryError
from kaos_operator.queue import Workers, WorkQueue
from kaos_operator.reconcilers import Outcome, Reconciler, build_reconcilers

from tests.support.operator_context import (
    FakeContext,
    ManualTimer,
    proxy_api_spec,
    raw,
    ready_model_api,
    store_spec,
)

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Kind:
    kind: str
    name: str
    spec: dict[str, Any]
    invalid_spec: dict[str, Any]
    invalid_field: str
    needs_model_api: bool

    def __str__(self) -> str:
        return self.kind


KINDS = [
    Kind("ModelAPI", "llm", proxy_api_spec(), {"mode": "Bogus"}, "spec.mode", False),
    Kind(
        "MCPServer",
        "tools",
        {"params": "def up(x: str) -> str:\n    return x.upper()\n"},
        {"params": 5},
        "spec.params",
        False,
    ),
    Kind(
        "MemoryStore",
        "mem",
        store_spec(),
        {"models": {"summarization": {"modelAPI": 5}, "embedding": {"modelAPI": "llm"}}},
        "spec.models.summarization.modelAPI",
        True,
    ),
    Kind("Agent", "a1", {"modelAPI": "llm"}, {"modelAPI": 5}, "spec.modelAPI", True),
]


def setup(k: Kind, *, invalid: bool = False) -> tuple[FakeContext, Reconciler[Any]]:
    ctx = FakeContext()
    if k.needs_model_api:
        ready_model_api(ctx)
    ctx.add(raw(k.kind, k.name, k.invalid_spec if invalid else k.spec))
    return ctx, build_reconcilers(ctx, clock=lambda: T0)[k.kind]


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions") or []}


def writes_for(ctx: FakeContext, k: Kind) -> list[dict[str, Any]]:
    return [s for key, s in ctx.statuses if key == f"{k.kind}/ns/{k.name}"]


@pytest.mark.parametrize("k", KINDS, ids=str)
async def test_success_writes_status_once_then_ready(k: Kind) -> None:
    ctx, rec = setup(k)
    assert await rec.reconcile("ns", k.name) == Outcome.OK
    first = writes_for(ctx, k)
    assert len(first) == 1
    ready = conditions(first[0])[reasons.READY]
    assert (ready["status"], ready["reason"]) == ("False", reasons.DEPLOYMENT_PROGRESSING)
    assert first[0]["phase"] == reasons.PHASE_PENDING
    assert first[0]["observedGeneration"] == 1 and ready["observedGeneration"] == 1
    assert ("Deployment", "ns", k.name) in ctx.objects

    ctx.deployment_available("ns", k.name)
    assert await rec.reconcile("ns", k.name) == Outcome.OK
    second = writes_for(ctx, k)
    assert len(second) == 2
    ready = conditions(second[1])[reasons.READY]
    assert (ready["status"], ready["reason"]) == ("True", reasons.AVAILABLE)
    assert second[1]["phase"] == reasons.PHASE_READY
    assert [e.reason for e in ctx.events if e.obj == k.name] == [
        reasons.DEPLOYMENT_PROGRESSING,
        reasons.AVAILABLE,
    ]

    # Nothing changed: no apply would change anything and the status is not rewritten.
    assert await rec.reconcile("ns", k.name) == Outcome.OK
    assert len(writes_for(ctx, k)) == 2


@pytest.mark.parametrize("k", KINDS, ids=str)
async def test_temporary_error_writes_status_keeps_ready_and_raises(k: Kind) -> None:
    ctx, rec = setup(k)
    await rec.reconcile("ns", k.name)
    ctx.deployment_available("ns", k.name)
    await rec.reconcile("ns", k.name)
    ready_before = conditions(ctx.status_of(k.kind, "ns", k.name))[reasons.READY]
    assert ready_before["status"] == "True"

    # A new generation whose apply meets an overloaded API server.
    ctx.resources[(k.kind, "ns", k.name)]["metadata"]["generation"] = 2
    ctx.apply_errors.append(TemporaryError(503, "ServiceUnavailable", "etcd leader changed"))
    with pytest.raises(TemporaryError):
        await rec.reconcile("ns", k.name)
    status = writes_for(ctx, k)[-1]
    assert len(writes_for(ctx, k)) == 3
    assert status["message"] == "the API server answered 503 ServiceUnavailable; retrying"
    # The workload did not change: Ready stays as it was, so dependents do not react.
    assert conditions(status)[reasons.READY] == ready_before
    assert status["phase"] == reasons.PHASE_READY

    # The retry succeeds and clears the message.
    assert await rec.reconcile("ns", k.name) == Outcome.OK
    assert "message" not in writes_for(ctx, k)[-1]


async def test_unreachable_api_server_says_so_without_exception_text() -> None:
    ctx, rec = setup(KINDS[0])
    ctx.apply_errors.append(TemporaryError(0, "ClientConnectorError", "Cannot connect to host"))
    with pytest.raises(TemporaryError):
        await rec.reconcile("ns", "llm")
    assert ctx.statuses[-1][1]["message"] == "the API server could not be reached; retrying"


async def test_a_bug_in_a_reconcile_is_retried_with_a_fixed_message() -> None:
    ctx, rec = setup(KINDS[0])

    async def broken(owner_uid: str, desired: Any) -> None:
        raise KeyError("spec")

    ctx.apply = broken  # type: ignore[method-assign]
    with pytest.raises(KeyError):
        await rec.reconcile("ns", "llm")
    assert ctx.statuses[-1][1] == {"message": "reconcile failed (see the operator's log); retrying"}


async def test_status_write_failure_on_success_is_retried() -> None:
    ctx, rec = setup(KINDS[0])
    ctx.status_errors.append(TemporaryError(503, "ServiceUnavailable", ""))
    with pytest.raises(TemporaryError):
        await rec.reconcile("ns", "llm")
    assert await rec.reconcile("ns", "llm") == Outcome.OK
    assert len(ctx.statuses) == 1


@pytest.mark.parametrize("k", KINDS, ids=str)
async def test_permanent_error_is_a_condition_and_not_sent_again(k: Kind) -> None:
    ctx, rec = setup(k)
    refusal = 'Deployment.apps "x" is invalid: spec.template.spec.containers[0].image: Required'
    ctx.apply_errors.append(PermanentError(422, "Invalid", refusal))
    assert await rec.reconcile("ns", k.name) == Outcome.PERMANENT
    (status,) = writes_for(ctx, k)
    ready = conditions(status)[reasons.READY]
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        reasons.APPLY_FAILED,
        refusal,
    )
    assert status["phase"] == reasons.PHASE_FAILED
    assert ctx.events[-1].type_ == "Warning" and ctx.events[-1].reason == reasons.APPLY_FAILED

    # The status write's own watch event reconciles again: the same objects for the same
    # generation are not sent again, and the status is not rewritten.
    applies = len(ctx.applies)
    assert await rec.reconcile("ns", k.name) == Outcome.PERMANENT
    assert len(ctx.applies) == applies and len(writes_for(ctx, k)) == 1

    # A new generation is tried again.
    ctx.resources[(k.kind, "ns", k.name)]["metadata"]["generation"] = 2
    assert await rec.reconcile("ns", k.name) == Outcome.OK
    assert len(ctx.applies) == applies + 1
    assert conditions(writes_for(ctx, k)[-1])[reasons.READY]["reason"] != reasons.APPLY_FAILED


@pytest.mark.parametrize("k", KINDS, ids=str)
async def test_invalid_object_gets_a_condition_naming_the_field(k: Kind) -> None:
    ctx, rec = setup(k, invalid=True)
    assert await rec.reconcile("ns", k.name) == Outcome.INVALID
    (status,) = writes_for(ctx, k)
    ready = conditions(status)[reasons.READY]
    assert (ready["status"], ready["reason"]) == ("False", reasons.INVALID_SPEC)
    assert ready["message"].startswith(f"{k.invalid_field}: ")
    assert status["phase"] == reasons.PHASE_FAILED and status["observedGeneration"] == 1
    assert ctx.applies == []
    # Reconciled again (its own status event): nothing new to write, nothing applied.
    assert await rec.reconcile("ns", k.name) == Outcome.INVALID
    assert len(writes_for(ctx, k)) == 1 and ctx.applies == []


async def test_a_deleted_or_deleting_resource_is_left_to_the_garbage_collector() -> None:
    ctx, rec = setup(KINDS[0])
    assert await rec.reconcile("ns", "gone") == Outcome.GONE
    ctx.resources[("ModelAPI", "ns", "llm")]["metadata"]["deletionTimestamp"] = "2026-01-01T0:0:0Z"
    assert await rec.reconcile("ns", "llm") == Outcome.GONE
    assert ctx.statuses == [] and ctx.applies == []


# -- through the real work queue ----------------------------------------------------------


class Driven:
    """Workers over a real ``WorkQueue`` on a manual clock; ``attempt()`` waits for one."""

    def __init__(self, rec: Reconciler[Any], timer: ManualTimer) -> None:
        self.queue = WorkQueue(backoff_base=1.0, backoff_max=8.0, timer=timer)
        self.attempts = 0
        self._attempted = asyncio.Event()
        self._rec = rec
        self.workers = Workers(self.queue, self._handle, 1)

    async def _handle(self, key: Hashable) -> None:
        assert isinstance(key, tuple)
        try:
            await self._rec.reconcile(*key)
        finally:
            self.attempts += 1
            self._attempted.set()

    async def attempt(self, trigger: Callable[[], None]) -> None:
        """Run ``trigger`` and wait until a reconcile ran (the worker has requeued or
        forgotten the key by the time this returns: it does so before its next await)."""
        self._attempted.clear()
        trigger()
        await asyncio.wait_for(self._attempted.wait(), timeout=10)


async def test_permanent_error_is_attempted_once_by_the_queue() -> None:
    ctx, rec = setup(KINDS[0])
    ctx.apply_errors.append(PermanentError(403, "Forbidden", "deployments.apps is forbidden"))
    timer = ManualTimer()
    driven = Driven(rec, timer)
    driven.workers.start()
    try:
        await driven.attempt(lambda: driven.queue.add(("ns", "llm")))
        assert timer.pending == 0  # no retry scheduled
        timer.advance(3600)
        assert driven.queue.depth == 0 and driven.attempts == 1 and len(ctx.applies) == 1
        ready = conditions(ctx.status_of("ModelAPI", "ns", "llm"))[reasons.READY]
        assert ready["reason"] == reasons.APPLY_FAILED
    finally:
        await driven.workers.stop()


async def test_invalid_object_is_attempted_once_by_the_queue() -> None:
    ctx, rec = setup(KINDS[3], invalid=True)
    timer = ManualTimer()
    driven = Driven(rec, timer)
    driven.workers.start()
    try:
        await driven.attempt(lambda: driven.queue.add(("ns", "a1")))
        timer.advance(3600)
        assert timer.pending == 0 and driven.queue.depth == 0 and driven.attempts == 1
        assert ctx.applies == []
    finally:
        await driven.workers.stop()


async def test_temporary_error_is_retried_after_its_backoff() -> None:
    ctx, rec = setup(KINDS[0])
    ctx.apply_errors.extend(
        [TemporaryError(503, "ServiceUnavailable", ""), TemporaryError(429, "TooManyRequests", "")]
    )
    timer = ManualTimer()
    driven = Driven(rec, timer)
    driven.workers.start()
    try:
        await driven.attempt(lambda: driven.queue.add(("ns", "llm")))
        assert driven.attempts == 1 and timer.pending == 1
        timer.advance(0.5)  # before the first backoff (1 s): nothing runs
        assert driven.queue.depth == 0 and driven.attempts == 1
        await driven.attempt(lambda: timer.advance(0.5))
        assert driven.attempts == 2 and timer.pending == 1  # second failure: 2 s
        await driven.attempt(lambda: timer.advance(2))
        assert driven.attempts == 3 and timer.pending == 0 and len(ctx.applies) == 3
        ready = conditions(ctx.status_of("ModelAPI", "ns", "llm"))[reasons.READY]
        assert ready["reason"] == reasons.DEPLOYMENT_PROGRESSING
    finally:
        await driven.workers.stop()
