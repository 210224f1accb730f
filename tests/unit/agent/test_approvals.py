"""Approval gates' parts: which calls a gate stops (on a real pydantic-ai run, the model a
function at the model boundary), the paused task's shape and its decision, and who may
decide (the task store the in-process one; RBAC's answer the one boundary faked)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import ParseDict  # type: ignore[import-untyped]
from google.protobuf.struct_pb2 import Value  # type: ignore[import-untyped]
from kaos_agent.a2a.rpc_errors import TASK_NOT_FOUND, RpcError
from kaos_agent.a2a.tasks import Claim, MemoryTaskStore, new_task
from kaos_agent.approvals.desk import ApprovalDesk, NotPaused, parse_decision
from kaos_agent.approvals.gate import gate_toolsets
from kaos_agent.approvals.pending import (
    APPROVAL_KEY,
    Decision,
    approval_of,
    decided,
    paused,
    results,
)
from kaos_agent.audit.log import MemoryAuditLog
from kaos_agent.context import RunDeps, Verified
from kaos_agent.settings import ApprovalPolicy
from kaos_agent.toolsets import GuardedToolset
from kaos_core.auth.verify import Forbidden
from kaos_core.endpoints import Endpoint
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.toolsets import FunctionToolset

POLICY = ApprovalPolicy.model_validate(
    {"rules": [{"mcpServer": "payments", "tools": ["charge"]}, {"peer": "billing"}]}
)
CALLS = ["charge", "quote", "delegate_to_billing", "delegate_to_other"]


def calling_all(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, {}, tool_call_id=name) for name in CALLS])


async def test_a_gate_stops_only_the_calls_its_rules_name() -> None:
    ran: list[str] = []

    def tool(name: str) -> Any:
        async def run() -> str:
            ran.append(name)
            return name

        run.__name__ = name
        return run

    servers = GuardedToolset(
        FunctionToolset([tool("charge"), tool("quote")]), label_text="mcp:payments"
    )
    peers = GuardedToolset(
        FunctionToolset([tool("delegate_to_billing"), tool("delegate_to_other")]),
        label_text="delegation",
    )
    endpoints = [Endpoint("billing", "http://b"), Endpoint("other", "http://o")]
    gated = gate_toolsets([servers, peers], POLICY, endpoints)
    agent = Agent(FunctionModel(calling_all), deps_type=RunDeps, toolsets=gated)

    result = await agent.run(
        "go", deps=RunDeps(session_id="s"), output_type=[str, DeferredToolRequests]
    )

    assert isinstance(result.output, DeferredToolRequests)
    assert sorted(c.tool_name for c in result.output.approvals) == [
        "charge",
        "delegate_to_billing",
    ]
    assert sorted(ran) == ["delegate_to_other", "quote"]
    # Without a policy the toolsets are as they were.
    assert gate_toolsets([servers, peers], None, endpoints) == [servers, peers]


def requests() -> DeferredToolRequests:
    call = ToolCallPart("charge", {"amount": 5}, tool_call_id="c1")
    return DeferredToolRequests(approvals=[call])


def working_task() -> pb.Task:
    message = pb.Message(message_id="m1", role=pb.ROLE_USER, parts=[pb.Part(text="pay")])
    return new_task(message, context_id="s1", metadata={})


def test_a_paused_task_carries_its_calls_and_its_decision() -> None:
    task = working_task()
    assert paused(requests(), 0.0)(task)
    assert task.status.state == pb.TASK_STATE_INPUT_REQUIRED
    pending = approval_of(task)
    assert pending == {
        "state": "pending",
        "calls": [{"tool": "charge", "arguments": {"amount": 5.0}, "toolCallId": "c1"}],
        "deadline": "1970-01-01T00:00:00Z",
    }
    assert task.status.message.parts[1].data.struct_value["approval"]["calls"][0]["tool"] == (
        "charge"
    )
    assert not paused(requests(), 0.0)(task)  # already paused: no change

    approve = Decision("approve", "alice")
    assert results(task, approve) == DeferredToolResults(approvals={"c1": True})
    deny = results(task, Decision("deny", "alice", "wrong card")).approvals["c1"]
    assert isinstance(deny, ToolDenied) and "wrong card" in deny.message
    late = results(task, Decision("deny", "timeout")).approvals["c1"]
    assert isinstance(late, ToolDenied) and "in time" in late.message

    assert decided(approve)(task)
    assert task.status.state == pb.TASK_STATE_WORKING
    record = approval_of(task)
    assert (record["state"], record["decidedBy"]) == ("approved", "alice")
    assert not decided(approve)(task)  # not paused any more


def decision_message(task_id: str, **data: object) -> pb.Message:
    value = Value()
    ParseDict(data, value)
    return pb.Message(
        message_id="d1", task_id=task_id, role=pb.ROLE_USER, parts=[pb.Part(data=value)]
    )


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({}, "carries a data part"),
        ({"decision": "maybe"}, '"approve" or "deny"'),
        ({"decision": "approve", "reason": "x" * 1001}, "at most 1000"),
        ({"decision": "deny", "reason": 5}, "at most 1000"),
    ],
)
def test_a_decision_that_is_not_one_is_refused(data: dict[str, Any], words: str) -> None:
    message = decision_message("t", **data) if data else pb.Message(parts=[pb.Part(text="ok")])
    with pytest.raises(RpcError) as refused:
        parse_decision(message)
    assert words in refused.value.message


class Desk:
    """A desk on the in-process store, its resumed runs recorded instead of run."""

    def __init__(self, approver: Any = None, clock: float = 1000.0) -> None:
        self.now = clock
        self.store = MemoryTaskStore(clock=lambda: self.now)
        self.audit = MemoryAuditLog()
        self.desk = ApprovalDesk(
            self.store,
            POLICY,
            runner="r1",
            agent="payer",
            approver=approver,
            audit=self.audit,
            clock=lambda: self.now,
        )
        self.resumed: list[tuple[Claim, DeferredToolResults]] = []
        self.desk.resume = self._resume

    def _resume(self, claim: Claim, approvals: DeferredToolResults) -> asyncio.Task[None]:
        self.resumed.append((claim, approvals))
        return asyncio.get_running_loop().create_task(asyncio.sleep(0))

    async def paused_task(self, owner: str | None) -> str:
        task = working_task()
        await self.store.create(task, principal=owner, runner="r1")
        assert await self.store.pause(task.id, "r1", paused(requests(), 2000.0), b"{}", 2000.0)
        return task.id

    async def state(self, task_id: str) -> int:
        found = await self.store.owned(task_id)
        assert found is not None
        return int(found[0].status.state)


def deps(principal: str | None) -> RunDeps:
    return RunDeps(session_id="s", principal=principal)


def verified(principal: str) -> Verified:
    return Verified(derived=True, principal=principal, user_token="token-of-" + principal)


async def test_only_the_runs_own_user_decides_without_verified_identity() -> None:
    desk = Desk()
    task_id = await desk.paused_task("alice")
    with pytest.raises(Forbidden):
        await desk.desk.decide(decision_message(task_id, decision="approve"), deps("bob"), None)
    assert await desk.state(task_id) == pb.TASK_STATE_INPUT_REQUIRED
    assert desk.resumed == [] and await desk.audit.query() == []

    message = decision_message(task_id, decision="deny", reason="no")
    task, run = await desk.desk.decide(message, deps("alice"), None)
    await run
    assert task.status.state == pb.TASK_STATE_WORKING
    [(claim, given)] = desk.resumed
    assert claim.principal == "alice" and isinstance(given.approvals["c1"], ToolDenied)
    [entry] = await desk.audit.query(task=task_id)
    assert (entry.kind, entry.name, entry.outcome, entry.decided_by) == (
        "approval",
        "charge",
        "denied",
        "alice",
    )
    assert (entry.user, entry.at) == ("alice", 1000.0)
    with pytest.raises(NotPaused):
        await desk.desk.decide(decision_message(task_id, decision="approve"), deps("alice"), None)
    with pytest.raises(RpcError) as missing:
        await desk.desk.decide(decision_message("nope", decision="approve"), deps("alice"), None)
    assert missing.value.code == TASK_NOT_FOUND


async def test_an_anonymous_run_is_anyones_to_decide_as_it_is_to_read() -> None:
    desk = Desk()
    task_id = await desk.paused_task(None)
    _, run = await desk.desk.decide(decision_message(task_id, decision="approve"), deps(None), None)
    await run
    assert desk.resumed[0][1].approvals == {"c1": True}


async def test_verified_users_other_than_the_runs_need_rbacs_approve() -> None:
    asked: list[str | None] = []
    granted = {"carol"}

    async def rbac(who: Verified) -> bool:
        asked.append(who.principal)
        return who.principal in granted

    desk = Desk(approver=rbac)
    task_id = await desk.paused_task("alice")
    approve = decision_message(task_id, decision="approve")
    with pytest.raises(Forbidden):
        await desk.desk.decide(approve, deps("bob"), verified("bob"))
    assert await desk.state(task_id) == pb.TASK_STATE_INPUT_REQUIRED
    _, run = await desk.desk.decide(approve, deps("carol"), verified("carol"))
    await run
    assert asked == ["bob", "carol"]
    assert (await desk.audit.query())[0].decided_by == "carol"

    # The run's own verified user needs no grant; without RBAC nobody else decides.
    alone = Desk()
    other = await alone.paused_task("alice")
    message = decision_message(other, decision="approve")
    with pytest.raises(Forbidden):
        await alone.desk.decide(message, deps("carol"), verified("carol"))
    _, run = await alone.desk.decide(message, deps("alice"), verified("alice"))
    await run
    assert asked == ["bob", "carol"]


async def test_the_timeout_decides_overdue_runs_once() -> None:
    desk = Desk()
    task_id = await desk.paused_task("alice")
    await desk.desk.tick()
    assert desk.resumed == []  # not due yet
    desk.now = 2000.5
    await desk.desk.tick()
    await desk.desk.tick()
    [(claim, given)] = desk.resumed
    assert claim.task.id == task_id and isinstance(given.approvals["c1"], ToolDenied)
    record = approval_of(claim.task)
    assert (record["state"], record["decidedBy"]) == ("timeout", "timeout")
    [entry] = await desk.audit.query()
    assert (entry.outcome, entry.decided_by) == ("timeout", "timeout")
    assert APPROVAL_KEY in claim.task.metadata
