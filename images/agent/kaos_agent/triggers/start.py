"""The one A2A task a trigger delivery starts: as a non-blocking ``SendMessage`` does
(``kaos_agent.a2a.server``), so it is stored, run in the background, checkpointed, resumed
on another replica if this one dies, and read, listed and canceled over A2A like any task.

Its owner is the agent itself, as for autonomous runs (``kaos_agent.autonomous``): the
principal is the agent's identity (``AGENT_IDENTITY``, else ``agent:<name>``), and the
session is the trigger's name with the delivery's id, so each delivery has a session of
its own and the same delivery always names the same one. The run context goes through the
same parser as a request's (``run_context``), from the headers the agent itself would send.
"""

from __future__ import annotations

import uuid

from a2a.types import a2a_pb2 as pb
from kaos_core.wire import PRINCIPAL_HEADER, SESSION_HEADER

from kaos_agent.a2a.server import A2AServer
from kaos_agent.context import RunDeps, run_context
from kaos_agent.settings import AgentSettings


def owner(settings: AgentSettings) -> str:
    """Who a trigger's task belongs to: the agent itself."""
    return settings.agent.identity or f"agent:{settings.agent.name}"


def trigger_context(principal: str, trigger: str, delivery: str, request_id: str) -> RunDeps:
    return run_context(
        {SESSION_HEADER: f"trigger-{trigger}-{delivery}", PRINCIPAL_HEADER: principal},
        request_id=request_id,
    )


async def start_task(server: A2AServer, text: str, deps: RunDeps) -> str:
    """Create the task of ``text`` and run it in the background; its id.

    Raises ``ShuttingDown`` (503) on a stopping replica and ``TaskStoreUnavailable`` when
    the task cannot be stored: nothing runs then.
    """
    server.runs.check_open()
    message = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, parts=[pb.Part(text=text)])
    task, _ = await server.start(message, deps)
    return str(task.id)
