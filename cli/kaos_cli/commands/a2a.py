"""``kaos a2a send|get|cancel|list``: an agent's A2A tasks (``kaos_cli.clients.a2a``).

Task states print without the ``TASK_STATE_`` prefix (``COMPLETED``, ``WORKING``, ...);
``-o json|yaml`` prints the task, or the list's answer, as the agent sent it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import click

from kaos_cli.clients.a2a import TaskClient, answer_of, state_of, task_client
from kaos_cli.clients.agent import headers_for
from kaos_cli.commands.agent_reach import call as call_agent
from kaos_cli.commands.agent_reach import complete_agent, talk_options
from kaos_cli.commands.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.kubectl.sync import Kube
from kaos_cli.output import emit


@click.group(
    "a2a",
    context_settings=CONTEXT_SETTINGS,
    help="A2A tasks of an agent: send a message, get, cancel or list tasks.",
)
def a2a_group() -> None:
    pass


def call(
    kube: Kube,
    agent: str,
    url: str | None,
    headers: dict[str, str],
    use: Callable[[TaskClient], Awaitable[dict[str, Any]]],
) -> dict[str, Any]:
    """One call to the agent's tasks, through ``--url`` or a port-forward."""

    async def go(base: str) -> dict[str, Any]:
        async with task_client(base, headers) as tasks:
            return await use(tasks)

    return call_agent(kube, agent, url, go)


def show(cx: Cx, tasks: list[dict[str, Any]], document: Any) -> None:
    rows = [[t.get("id"), t.get("contextId"), state_of(t), answer_of(t)] for t in tasks]
    emit(
        cx.fmt,
        document,
        ["task", "session", "state", "answer"],
        rows,
        empty="no tasks",
        wrap=["answer"],
    )


@a2a_group.command("send", help="Send a message as a new task; print its state and answer.")
@click.argument("agent", shell_complete=complete_agent)
@click.argument("message")
@click.option("--session", default=None, help="context id: the conversation to continue")
@click.option("--no-wait", is_flag=True, help="return at once (the task runs on; poll with get)")
@talk_options
@common_options()
def send_cmd(
    cx: Cx,
    agent: str,
    message: str,
    session: str | None,
    no_wait: bool,
    url: str | None,
    principal: str | None,
    token: str | None,
) -> int:
    task = call(
        cx.kube,
        agent,
        url,
        headers_for(None, principal, token),
        lambda tasks: tasks.send(message, session=session, wait=not no_wait),
    )
    show(cx, [task], task)
    return 1 if state_of(task) in ("FAILED", "REJECTED") else 0


@a2a_group.command("get", help="One task: its state and answer (-o json: the whole task).")
@click.argument("agent", shell_complete=complete_agent)
@click.argument("task_id")
@click.option("--history", type=int, default=0, help="include the last N messages")
@talk_options
@common_options()
def get_cmd(
    cx: Cx,
    agent: str,
    task_id: str,
    history: int,
    url: str | None,
    principal: str | None,
    token: str | None,
) -> int:
    task = call(
        cx.kube,
        agent,
        url,
        headers_for(None, principal, token),
        lambda tasks: tasks.get(task_id, history=history),
    )
    show(cx, [task], task)
    return 0


@a2a_group.command("cancel", help="Cancel a running task (a finished one cannot be).")
@click.argument("agent", shell_complete=complete_agent)
@click.argument("task_id")
@talk_options
@common_options()
def cancel_cmd(
    cx: Cx, agent: str, task_id: str, url: str | None, principal: str | None, token: str | None
) -> int:
    task = call(
        cx.kube, agent, url, headers_for(None, principal, token), lambda t: t.cancel(task_id)
    )
    show(cx, [task], task)
    return 0


@a2a_group.command("list", help="The agent's tasks visible to you, newest first.")
@click.argument("agent", shell_complete=complete_agent)
@click.option("--session", default=None, help="only this context id")
@click.option("--limit", type=int, default=50, show_default=True, help="at most this many")
@talk_options
@common_options()
def list_cmd(
    cx: Cx,
    agent: str,
    session: str | None,
    limit: int,
    url: str | None,
    principal: str | None,
    token: str | None,
) -> int:
    result = call(
        cx.kube,
        agent,
        url,
        headers_for(None, principal, token),
        lambda tasks: tasks.list(session=session, limit=limit),
    )
    tasks = result.get("tasks") or []
    show(cx, tasks, result)
    return 0
