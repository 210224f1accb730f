"""What a run resumed from its A2A task reads back: the context its first run had (the
session, user, depth, the verified agent that delegated it and the request), never the
user's token."""

from __future__ import annotations

import pytest
from a2a.types import a2a_pb2 as pb
from kaos_agent.a2a.run_task import kaos_metadata, resumed_deps, run_task
from kaos_agent.context import RunDeps
from kaos_core.errors import KaosError


def message(text: str = "pay the invoice") -> pb.Message:
    return pb.Message(message_id="m-1", role=pb.ROLE_USER, parts=[pb.Part(text=text)])


def test_a_resumed_run_has_its_first_runs_context_but_not_the_token() -> None:
    first = RunDeps(
        session_id="sess-1",
        principal="alice",
        depth=2,
        request_id="req-1",
        user_token="secret-token",
        caller="system:serviceaccount:team:planner",
    )
    task = run_task(message(), first)
    resumed = resumed_deps(task, "alice")
    assert resumed == RunDeps(
        session_id="sess-1",
        principal="alice",
        depth=2,
        request_id="req-1",
        caller="system:serviceaccount:team:planner",
    )
    assert "secret-token" not in str(task)


def test_a_run_nobody_delegated_keeps_no_caller() -> None:
    task = run_task(message(), RunDeps(session_id="sess-2", principal=None))
    assert kaos_metadata(task.metadata) == {
        "sessionId": "sess-2",
        "principal": None,
        "delegationDepth": 0,
    }
    assert resumed_deps(task, None) == RunDeps(session_id="sess-2", principal=None)


def test_a_stored_depth_out_of_range_is_refused() -> None:
    task = run_task(message(), RunDeps(session_id="sess-3", principal="bob"))
    task.metadata["kaos"]["delegationDepth"] = 10_000
    with pytest.raises(KaosError):
        resumed_deps(task, "bob")
