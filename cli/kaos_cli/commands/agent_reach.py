"""How a command reaches one agent, and says why it could not.

Every command that talks to an agent (``kaos agent invoke|chat|tools|audit|approvals|
approve|deny``, ``kaos a2a``, ``kaos usage``) reaches it the same way: at ``--url``, or
through a ``kubectl port-forward`` to the Agent's Service for the duration of the command,
with the same ``--url``/``--principal``/``--token`` options. A failure of the agent's
clients (``AgentError`` over HTTP, ``TaskCallFailed`` over A2A) becomes the CLI's one line.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from typing import Any, TypeVar

import click

from kaos_cli.clients.a2a import TaskCallFailed, TaskUnreachable
from kaos_cli.clients.agent import AgentError, AgentRefused, AgentUnreachable, AnswerBrokeOff
from kaos_cli.clients.agent_ops import AgentOps, agent_ops
from kaos_cli.commands.common import complete_resource
from kaos_cli.commands.reach import forwarded
from kaos_cli.kinds import AGENT, AGENT_PORT
from kaos_cli.kubectl.forward import Unreachable
from kaos_cli.kubectl.sync import Kube
from kaos_cli.tools import CliError

T = TypeVar("T")
OPS_TIMEOUT = 30.0
complete_agent = complete_resource(AGENT.resource)


def talk_options(fn: Any) -> Any:
    """``--url``, ``--principal`` and ``--token``: where the agent is and who asks."""
    fn = click.option(
        "--token",
        default=None,
        envvar="KAOS_TOKEN",
        help="bearer token for the agent (env KAOS_TOKEN)",
    )(fn)
    fn = click.option("--principal", default=None, help="end-user subject (X-Principal)")(fn)
    fn = click.option("--url", default=None, help="agent base URL instead of a port-forward")(fn)
    return fn


@contextlib.contextmanager
def agent_url(kube: Kube, name: str, url: str | None) -> Iterator[str]:
    """``--url``, or a port-forward to the Agent's Service while the block runs."""
    if url:
        yield url.rstrip("/")
        return
    obj = kube.get(AGENT.resource, name, missing=AGENT.missing())
    with forwarded(kube, AGENT, obj, AGENT_PORT) as local:
        yield local


def failed(exc: AgentError | TaskCallFailed) -> CliError:
    """The agent client's failure as the CLI's one line."""
    if isinstance(exc, TaskUnreachable):
        return Unreachable(exc.message, exc.message.rsplit(": ", 1)[-1])
    if isinstance(exc, AgentRefused):
        payload = exc.payload
        error = payload.get("error") if isinstance(payload, dict) else None
        detail = error.get("message") if isinstance(error, dict) else payload
        hint = " (pass --token or --principal)" if exc.status in (401, 403) else ""
        return CliError(f"agent answered {exc.status}: {detail}{hint}")
    if isinstance(exc, AnswerBrokeOff):
        return CliError(f"agent failed mid-answer: {exc.message}")
    if isinstance(exc, AgentUnreachable):
        return Unreachable(exc.message, exc.cause)
    return CliError(exc.message)


Work = Callable[[str], Coroutine[Any, Any, T]]


def run(talk: Coroutine[Any, Any, T]) -> T:
    """``talk`` to agents run to its end, a client's failure as the CLI's one line."""
    try:
        return asyncio.run(talk)
    except (AgentError, TaskCallFailed) as exc:
        raise failed(exc) from exc


def call(kube: Kube, name: str, url: str | None, work: Work[T]) -> T:
    """``work`` on the agent ``name`` reached at ``--url`` or through a port-forward."""
    with agent_url(kube, name, url) as base:
        return run(work(base))


def with_ops(headers: Mapping[str, str], use: Callable[[AgentOps], Awaitable[T]]) -> Work[T]:
    """``use`` of the operations client of the agent at a base URL (work for ``call``)."""

    async def work(base: str) -> T:
        async with agent_ops(base, headers, request_timeout=OPS_TIMEOUT) as ops:
            return await use(ops)

    return work
