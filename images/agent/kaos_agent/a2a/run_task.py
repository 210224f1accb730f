"""The A2A task a run is kept in, and what it carries for the run under ``kaos`` in its
metadata (its session, principal, delegation depth, the verified agent that delegated it
and the request that started it): what a run resumed from it, on any replica, reads back.
The user's token is not kept (a credential, and short-lived): a resumed run goes on
without it."""

from __future__ import annotations

from typing import Any

from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from google.protobuf.struct_pb2 import Struct  # type: ignore[import-untyped]

from kaos_agent.a2a.tasks import new_task
from kaos_agent.context import RunDeps, parse_depth
from kaos_agent.delegation import KAOS_METADATA_KEY


def run_task(message: pb.Message, deps: RunDeps) -> pb.Task:
    """A working task for ``message`` (its text is the prompt), run for ``deps``."""
    kaos: dict[str, object] = {
        "sessionId": deps.session_id,
        "principal": deps.principal,
        "delegationDepth": deps.depth,
    }
    optional = {"caller": deps.caller, "requestId": deps.request_id}
    kaos.update((k, v) for k, v in optional.items() if v is not None)
    meta: dict[str, object] = {KAOS_METADATA_KEY: kaos}
    return new_task(message, context_id=deps.session_id, metadata=meta)


def kaos_metadata(metadata: Struct) -> dict[str, Any]:
    """The ``kaos`` part of a task's or a message's metadata (empty when absent)."""
    kaos = MessageToDict(metadata).get(KAOS_METADATA_KEY)
    return kaos if isinstance(kaos, dict) else {}


def session_of(task: pb.Task) -> str:
    """The session a task's run belongs to."""
    return str(kaos_metadata(task.metadata).get("sessionId") or task.context_id)


def resumed_deps(task: pb.Task, principal: str | None) -> RunDeps:
    """The context of ``task``'s run resumed (after its replica stopped, or on a decision),
    as its first run had it; ``principal`` is the store's record of its owner. Raises
    ``KaosError`` on a delegation depth out of range."""
    kaos = kaos_metadata(task.metadata)
    caller, request_id = kaos.get("caller"), kaos.get("requestId")
    return RunDeps(
        session_id=session_of(task),
        principal=principal,
        depth=parse_depth(kaos.get("delegationDepth", 0)),
        request_id=request_id if isinstance(request_id, str) else None,
        caller=caller if isinstance(caller, str) else None,
    )
