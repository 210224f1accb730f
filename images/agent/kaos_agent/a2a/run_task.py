"""The A2A task a run is kept in, and what it carries for the run under ``kaos`` in its
metadata (its session, principal and delegation depth): what a run resumed from it, on
any replica, reads back."""

from __future__ import annotations

from typing import Any

from a2a.types import a2a_pb2 as pb
from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
from google.protobuf.struct_pb2 import Struct  # type: ignore[import-untyped]

from kaos_agent.a2a.tasks import new_task
from kaos_agent.context import RunDeps
from kaos_agent.delegation import KAOS_METADATA_KEY


def run_task(message: pb.Message, deps: RunDeps) -> pb.Task:
    """A working task for ``message`` (its text is the prompt), run for ``deps``."""
    meta: dict[str, object] = {
        KAOS_METADATA_KEY: {
            "sessionId": deps.session_id,
            "principal": deps.principal,
            "delegationDepth": deps.depth,
        }
    }
    return new_task(message, context_id=deps.session_id, metadata=meta)


def kaos_metadata(metadata: Struct) -> dict[str, Any]:
    """The ``kaos`` part of a task's or a message's metadata (empty when absent)."""
    kaos = MessageToDict(metadata).get(KAOS_METADATA_KEY)
    return kaos if isinstance(kaos, dict) else {}


def session_of(task: pb.Task) -> str:
    """The session a task's run belongs to."""
    return str(kaos_metadata(task.metadata).get("sessionId") or task.context_id)
