"""``kaos a2a send|get|cancel|list``: an agent's A2A tasks over its JSON-RPC endpoint.

The requests are A2A 1.0 JSON-RPC (``SendMessage``, ``GetTask``, ``CancelTask``,
``ListTasks``) in protobuf's JSON mapping, as the agent serves them at ``POST /``. Task
states print without the ``TASK_STATE_`` prefix (``COMPLETED``, ``WORKING``, ...).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import aiohttp
import click

from kaos_cli.agent import agent_url, complete_agent, headers_for
from kaos_cli.common import CONTEXT_SETTINGS, Cx, common_options
from kaos_cli.output import emit
from kaos_cli.tools import CliError

# Tasks still running: ``send`` without --no-wait never returns one of these.
ACTIVE = ("SUBMITTED", "WORKING")


@click.group(
    "a2a",
    context_settings=CONTEXT_SETTINGS,
    help="A2A tasks of an agent: send a message, get, cancel or list tasks.",
)
def a2a_group() -> None:
    pass


async def rpc(url: str, method: str, params: dict[str, Any], headers: dict[str, str]) -> Any:
    body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex[:8], "method": method, "params": params}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=300)) as http,
            http.post(url + "/", json=body, headers=headers) as resp,
        ):
            payload: Any = await resp.json(content_type=None)
            status = resp.status
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise CliError(f"agent at {url} failed: {type(exc).__name__}: {exc}") from exc
    if status >= 400 or not isinstance(payload, dict):
        raise CliError(f"agent at {url} answered {status} to {method}")
    if "error" in payload:
        error = payload["error"] or {}
        raise CliError(f"{method} refused ({error.get('code')}): {error.get('message')}")
    return payload.get("result")


def state_of(task: dict[str, Any]) -> str:
    return str((task.get("status") or {}).get("state", "")).removeprefix("TASK_STATE_")


def answer_of(task: dict[str, Any]) -> str:
    texts = [
        part.get("text", "")
        for artifact in task.get("artifacts") or []
        for part in artifact.get("parts") or []
    ]
    if texts:
        return "".join(texts)
    message = (task.get("status") or {}).get("message") or {}
    return "".join(p.get("text", "") for p in message.get("parts") or [])


def show(cx: Cx, tasks: list[dict[str, Any]], document: Any) -> None:
    rows = [[t.get("id"), t.get("contextId"), state_of(t), answer_of(t)] for t in tasks]
    emit(cx.fmt, document, ["task", "session", "state", "answer"], rows, empty="no tasks")


def _talk(fn: Any) -> Any:
    fn = click.option("--token", default=None, envvar="KAOS_TOKEN", help="bearer token")(fn)
    fn = click.option("--principal", default=None, help="end-user subject (X-Principal)")(fn)
    fn = click.option("--url", default=None, help="agent base URL instead of a port-forward")(fn)
    return fn


@a2a_group.command("send", help="Send a message as a new task; print its state and answer.")
@click.argument("agent", shell_complete=complete_agent)
@click.argument("message")
@click.option("--session", default=None, help="context id: the conversation to continue")
@click.option("--no-wait", is_flag=True, help="return at once (the task runs on; poll with get)")
@_talk
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
    msg: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": message}],
    }
    if session:
        msg["contextId"] = session
    params: dict[str, Any] = {"message": msg}
    if no_wait:
        params["configuration"] = {"returnImmediately": True}
    with agent_url(cx.kube, agent, url) as base:
        result = asyncio.run(rpc(base, "SendMessage", params, headers_for(None, principal, token)))
    task = (result or {}).get("task") or {}
    show(cx, [task], task)
    return 1 if state_of(task) in ("FAILED", "REJECTED") else 0


@a2a_group.command("get", help="One task: its state and answer (-o json: the whole task).")
@click.argument("agent", shell_complete=complete_agent)
@click.argument("task_id")
@click.option("--history", type=int, default=0, help="include the last N messages")
@_talk
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
    params: dict[str, Any] = {"id": task_id, **({"historyLength": history} if history else {})}
    with agent_url(cx.kube, agent, url) as base:
        task = asyncio.run(rpc(base, "GetTask", params, headers_for(None, principal, token)))
    show(cx, [task], task)
    return 0


@a2a_group.command("cancel", help="Cancel a running task (a finished one cannot be).")
@click.argument("agent", shell_complete=complete_agent)
@click.argument("task_id")
@_talk
@common_options()
def cancel_cmd(
    cx: Cx, agent: str, task_id: str, url: str | None, principal: str | None, token: str | None
) -> int:
    with agent_url(cx.kube, agent, url) as base:
        task = asyncio.run(
            rpc(base, "CancelTask", {"id": task_id}, headers_for(None, principal, token))
        )
    show(cx, [task], task)
    return 0


@a2a_group.command("list", help="The agent's tasks visible to you, newest first.")
@click.argument("agent", shell_complete=complete_agent)
@click.option("--session", default=None, help="only this context id")
@click.option("--limit", type=int, default=50, show_default=True, help="at most this many")
@_talk
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
    params: dict[str, Any] = {"pageSize": limit, **({"contextId": session} if session else {})}
    with agent_url(cx.kube, agent, url) as base:
        result = asyncio.run(rpc(base, "ListTasks", params, headers_for(None, principal, token)))
    tasks = (result or {}).get("tasks") or []
    show(cx, tasks, result)
    return 0
