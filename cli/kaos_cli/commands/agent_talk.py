"""``kaos agent invoke|chat|tools``: talking to an agent.

``invoke`` sends one OpenAI-style chat completion (for scripts); ``chat`` is an
interactive session that streams the answer as it is produced and keeps one session id
for the whole run, so the agent's memory carries the conversation; ``tools`` lists what
the agent can call. The agent is reached through ``--url`` or a ``kubectl port-forward``
to its Service for the duration of the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from typing import Any

import aiohttp
import click

from kaos_cli.clients.agent import (
    AgentError,
    chat,
    fetch_card,
    headers_for,
    stream_chat,
    tools_from_card,
    tools_from_spec,
)
from kaos_cli.commands.agent_reach import agent_url, complete_agent, failed, talk_options
from kaos_cli.commands.common import Cx, common_options
from kaos_cli.kinds import AGENT
from kaos_cli.output import emit, info, warn
from kaos_cli.tools import CliError

CARD_TIMEOUT = 30.0


async def answer_turn(
    url: str, name: str, text: str, headers: dict[str, str], request_timeout: float
) -> None:
    """Stream one answer to stdout as its pieces arrive."""
    timeout = aiohttp.ClientTimeout(total=None, sock_read=request_timeout)
    sys.stdout.write(f"{name}> ")
    sys.stdout.flush()
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            async for piece in stream_chat(http, url, name, text, headers):
                sys.stdout.write(piece)
                sys.stdout.flush()
    except AgentError as exc:
        sys.stdout.write("\n")  # end the answer's line: the error is a line of its own
        sys.stdout.flush()
        raise failed(exc) from exc
    sys.stdout.write("\n")
    sys.stdout.flush()


def chat_loop(
    url: str, name: str, session: str, headers: dict[str, str], request_timeout: float
) -> None:
    """Read a line, stream the answer, repeat. Input is read on the main thread, so
    Ctrl-C interrupts at once (exit 130) and Ctrl-D or /exit ends the session."""
    interactive = sys.stdin.isatty()
    if interactive:
        with contextlib.suppress(ImportError):
            import readline  # noqa: F401  (line editing and history for input())
    while True:
        try:
            line = input("you> " if interactive else "")
        except EOFError:
            print()
            return
        text = line.strip()
        if not text:
            continue
        if text in ("/exit", "/quit"):
            return
        asyncio.run(answer_turn(url, name, text, headers, request_timeout))


@click.command("invoke", help="Send one message and print the answer (for scripts).")
@click.argument("name", shell_complete=complete_agent)
@click.argument("message")
@click.option("--session", default=None, help="session id, to continue a conversation")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="seconds to wait")
@talk_options
@common_options()
def invoke_cmd(
    cx: Cx,
    name: str,
    message: str,
    session: str | None,
    timeout: float,
    url: str | None,
    principal: str | None,
    token: str | None,
) -> int:
    chosen = session or f"cli-{uuid.uuid4().hex[:12]}"
    with agent_url(cx.kube, name, url) as base:
        try:
            payload = asyncio.run(
                chat(
                    base,
                    name,
                    message,
                    session=chosen,
                    principal=principal,
                    request_timeout=timeout,
                    token=token,
                )
            )
        except AgentError as exc:
            raise failed(exc) from exc
    if cx.fmt != "table":
        emit(cx.fmt, payload)
    else:
        try:
            answer = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise CliError("agent answered without choices[0].message.content") from exc
        print(answer)
    if not session:
        sys.stderr.write(f"session: {chosen} (continue with --session {chosen})\n")
    return 0


@click.command(
    "chat",
    help="Talk to an agent interactively: answers stream as they are written, one session "
    "id for the whole run (the agent remembers the conversation). /exit or Ctrl-D ends.",
)
@click.argument("name", shell_complete=complete_agent)
@click.option("--session", default=None, help="session id (default: a new one for this run)")
@click.option(
    "--timeout",
    type=float,
    default=120.0,
    show_default=True,
    help="seconds to wait for the next piece of an answer",
)
@talk_options
@common_options()
def chat_cmd(
    cx: Cx,
    name: str,
    session: str | None,
    timeout: float,
    url: str | None,
    principal: str | None,
    token: str | None,
) -> int:
    chosen = session or f"cli-chat-{uuid.uuid4().hex[:12]}"
    with agent_url(cx.kube, name, url) as base:
        info(f"chatting with {name} at {base}, session {chosen} (/exit to end)")
        chat_loop(base, name, chosen, headers_for(chosen, principal, token), timeout)
    return 0


async def read_card(url: str, headers: dict[str, str]) -> dict[str, Any]:
    try:
        async with aiohttp.ClientSession() as http:
            return await fetch_card(http, url, headers, request_timeout=CARD_TIMEOUT)
    except AgentError as exc:
        raise failed(exc) from exc


@click.command(
    "tools",
    help="The tools an agent can call: its MCP servers' tools, its delegation peers and its "
    "memory tools, as the running agent advertises them in its card; from the Agent's spec "
    "when the agent cannot be reached.",
)
@click.argument("name", shell_complete=complete_agent)
@talk_options
@common_options()
def tools_cmd(cx: Cx, name: str, url: str | None, principal: str | None, token: str | None) -> int:
    headers = headers_for(None, principal, token)
    try:
        with agent_url(cx.kube, name, url) as base:
            rows = tools_from_card(asyncio.run(read_card(base, headers)))
        source = "agent"
    except CliError as exc:
        if url:
            raise
        obj = cx.kube.get(AGENT.resource, name, missing=AGENT.missing())
        warn(f"agent {name} not reachable ({exc.message}); tools from its spec")
        rows, source = tools_from_spec(obj), "spec"
    if cx.fmt == "table":
        emit(
            "table",
            rows,
            ["name", "source", "description"],
            [list(r.values()) for r in rows],
            empty=f"agent {name} has no tools",
            wrap=["description"],
        )
    else:
        emit(cx.fmt, {"agent": name, "from": source, "tools": rows})
    return 0
