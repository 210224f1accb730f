"""``kaos agent``: the shared commands, ``deploy``, and talking to an agent.

``invoke`` sends one OpenAI-style chat completion (for scripts); ``chat`` is an
interactive session that streams the answer as it is produced and keeps one session id
for the whole run, so the agent's memory carries the conversation; ``tools`` lists what
the agent can call. The agent is reached through ``--url`` or a ``kubectl port-forward``
to its Service for the duration of the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import click
from kaos_core.memory.identity import PRINCIPAL_HEADER, SESSION_HEADER

from kaos_cli.common import CONTEXT_SETTINGS, Cx, common_options, complete_resource
from kaos_cli.kube import Kube
from kaos_cli.output import emit, info, print_json, warn
from kaos_cli.portforward import port_forward, service_target
from kaos_cli.resources import AGENT, add_resource_commands, deploy, deploy_options, spec
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError

AGENT_PORT = 8000
complete_agent = complete_resource(AGENT.resource)


@click.group(
    "agent",
    context_settings=CONTEXT_SETTINGS,
    help="Agents: list, inspect, deploy, follow and talk to them.",
)
def agent_group() -> None:
    pass


add_resource_commands(agent_group, AGENT)


@contextlib.contextmanager
def agent_url(kube: Kube, name: str, url: str | None) -> Iterator[str]:
    """``--url``, or a port-forward to the Agent's Service while the block runs."""
    if url:
        yield url.rstrip("/")
        return
    obj = kube.get(AGENT.resource, name, missing=AGENT.missing())
    endpoint = (obj.get("status") or {}).get("endpoint")
    service, port = service_target(endpoint, name, AGENT_PORT)
    with port_forward(kube.kubectl, kube.namespace, service, port, context=kube.context) as local:
        yield local


def headers_for(session: str | None, principal: str | None, token: str | None) -> dict[str, str]:
    headers = {SESSION_HEADER: session} if session else {}
    if principal:
        headers[PRINCIPAL_HEADER] = principal
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _refusal(status: int, payload: Any) -> CliError:
    error = payload.get("error") if isinstance(payload, dict) else None
    detail = error.get("message") if isinstance(error, dict) else payload
    hint = " (pass --token or --principal)" if status in (401, 403) else ""
    return CliError(f"agent answered {status}: {detail}{hint}")


async def chat(
    url: str,
    model: str,
    message: str,
    *,
    session: str,
    principal: str | None,
    request_timeout: float,
    token: str | None = None,
) -> dict[str, Any]:
    """One non-streaming chat completion; the parsed response document."""
    body = {"model": model, "messages": [{"role": "user", "content": message}], "stream": False}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=request_timeout)) as http,
            http.post(
                url.rstrip("/") + "/v1/chat/completions",
                json=body,
                headers=headers_for(session, principal, token),
            ) as resp,
        ):
            payload: Any = await resp.json(content_type=None)
            if resp.status >= 400:
                raise _refusal(resp.status, payload)
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise CliError(f"agent at {url} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(payload, dict):
        raise CliError(f"agent at {url} answered no JSON object")
    return payload


async def stream_chat(
    http: aiohttp.ClientSession, url: str, model: str, message: str, headers: dict[str, str]
) -> AsyncIterator[str]:
    """The answer's text pieces as the agent streams them (server-sent events)."""
    body = {"model": model, "messages": [{"role": "user", "content": message}], "stream": True}
    async with http.post(url + "/v1/chat/completions", json=body, headers=headers) as resp:
        if resp.status >= 400:
            raise _refusal(resp.status, await resp.json(content_type=None))
        try:
            async for piece in completion_pieces(resp.content):
                yield piece
        except AnswerBrokeOff as exc:
            raise CliError(f"agent failed mid-answer: {exc.message}") from None


class AnswerBrokeOff(Exception):
    """The agent sent an error event in the middle of a streamed answer."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def completion_pieces(content: aiohttp.StreamReader) -> AsyncIterator[str]:
    """The text pieces of a chat-completions event stream, up to ``[DONE]``; an error
    event raises ``AnswerBrokeOff`` with the agent's message."""
    async for raw in content:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line.removeprefix("data:").strip()
        if data == "[DONE]":
            return
        event = json.loads(data)
        if "error" in event:
            raise AnswerBrokeOff(str((event.get("error") or {}).get("message") or "failed"))
        for choice in event.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                yield piece


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
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise CliError(f"agent at {url} failed: {type(exc).__name__}: {exc}") from exc
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


def _talk_options(fn: Any) -> Any:
    fn = click.option(
        "--token",
        default=None,
        envvar="KAOS_TOKEN",
        help="bearer token for the agent (env KAOS_TOKEN)",
    )(fn)
    fn = click.option("--principal", default=None, help="end-user subject (X-Principal)")(fn)
    fn = click.option("--url", default=None, help="agent base URL instead of a port-forward")(fn)
    return fn


@agent_group.command("invoke", help="Send one message and print the answer (for scripts).")
@click.argument("name", shell_complete=complete_agent)
@click.argument("message")
@click.option("--session", default=None, help="session id, to continue a conversation")
@click.option("--timeout", type=float, default=120.0, show_default=True, help="seconds to wait")
@_talk_options
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


@agent_group.command(
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
@_talk_options
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


def tools_from_card(card: dict[str, Any]) -> list[dict[str, str]]:
    rows = []
    for skill in card.get("skills") or []:
        tags = skill.get("tags") or []
        if "chat" in tags:
            continue
        source = next((t for t in tags if t.startswith(("mcp:", "peer:"))), tags[0] if tags else "")
        rows.append(
            {
                "name": str(skill.get("name")),
                "source": source,
                "description": str(skill.get("description") or ""),
            }
        )
    return rows


def tools_from_spec(obj: dict[str, Any]) -> list[dict[str, str]]:
    s = spec(obj)
    rows = [
        {
            "name": "(tools of the server)",
            "source": f"mcp:{server}",
            "description": "listed by the agent once it runs",
        }
        for server in s.get("mcpServers") or []
    ]
    for peer in (s.get("agentNetwork") or {}).get("access") or []:
        rows.append(
            {
                "name": f"delegate_to_{peer.replace('-', '_')}",
                "source": f"peer:{peer}",
                "description": f"Delegates tasks to the agent {peer}.",
            }
        )
    memory = (s.get("config") or {}).get("memory") or {}
    # A mode (all, read, write, none); a boolean in objects stored by earlier versions.
    offered = memory.get("tools")
    names = {
        True: ("search_memory", "save_memory"),
        "all": ("search_memory", "save_memory"),
        "read": ("search_memory",),
        "write": ("save_memory",),
    }.get(offered, ())
    descriptions = {
        "search_memory": "Search long-term memory for facts relevant to a query.",
        "save_memory": "Save a fact to long-term memory so later conversations can recall it.",
    }
    for tool in names:
        rows.append({"name": tool, "source": "memory", "description": descriptions[tool]})
    return rows


async def fetch_card(url: str, headers: dict[str, str]) -> dict[str, Any]:
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
            http.get(url + "/.well-known/agent-card.json", headers=headers) as resp,
        ):
            if resp.status >= 400:
                raise _refusal(resp.status, await resp.json(content_type=None))
            card: dict[str, Any] = await resp.json()
            return card
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise CliError(f"agent at {url} failed: {type(exc).__name__}: {exc}") from exc


@agent_group.command(
    "tools",
    help="The tools an agent can call: its MCP servers' tools, its delegation peers and its "
    "memory tools, as the running agent advertises them in its card; from the Agent's spec "
    "when the agent cannot be reached.",
)
@click.argument("name", shell_complete=complete_agent)
@_talk_options
@common_options()
def tools_cmd(cx: Cx, name: str, url: str | None, principal: str | None, token: str | None) -> int:
    headers = headers_for(None, principal, token)
    try:
        with agent_url(cx.kube, name, url) as base:
            rows = tools_from_card(asyncio.run(fetch_card(base, headers)))
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
        )
    else:
        emit(cx.fmt, {"agent": name, "from": source, "tools": rows})
    return 0


@agent_group.command(
    "deploy",
    help="Create or update an Agent. --memorystore makes its memory remote; --access lets it "
    "delegate to other agents.",
)
@click.argument("name", required=False)
@click.option("--modelapi", default=None, help="ModelAPI serving its model (required)")
@click.option("--model", default=None, help="model name, e.g. openai/gpt-4o-mini")
@click.option("--mcp", "mcp_servers", multiple=True, help="MCPServer it may use (repeatable)")
@click.option("--access", multiple=True, help="agent it may delegate to (repeatable)")
@click.option("--instructions", default=None, help="system instructions")
@click.option("--description", default=None, help="what it does (its A2A card)")
@click.option("--memorystore", default=None, help="remember through this MemoryStore")
@click.option("--memory-tools", is_flag=True, help="offer search_memory/save_memory as tools")
@click.option(
    "--expose/--no-expose", default=True, show_default=True, help="other agents may delegate to it"
)
@deploy_options
@common_options()
def agent_deploy(
    cx: Cx,
    name: str | None,
    modelapi: str | None,
    model: str | None,
    mcp_servers: tuple[str, ...],
    access: tuple[str, ...],
    instructions: str | None,
    description: str | None,
    memorystore: str | None,
    memory_tools: bool,
    expose: bool,
    file_: str | None,
    wait: bool,
    timeout: float,
    dry_run: bool,
) -> int:
    def build() -> dict[str, Any]:
        if not modelapi:
            raise CliError("kaos agent deploy needs --modelapi NAME", EXIT_ENVIRONMENT)
        if memory_tools and not memorystore:
            raise CliError("--memory-tools needs --memorystore", EXIT_ENVIRONMENT)
        config: dict[str, Any] = {}
        if instructions:
            config["instructions"] = instructions
        if description:
            config["description"] = description
        if memorystore:
            config["memory"] = {
                "type": "remote",
                "memoryStore": memorystore,
                **({"tools": "all"} if memory_tools else {}),
            }
        body: dict[str, Any] = {"modelAPI": modelapi}
        if model:
            body["model"] = model
        if mcp_servers:
            body["mcpServers"] = list(mcp_servers)
        body["agentNetwork"] = {"expose": expose, **({"access": list(access)} if access else {})}
        if config:
            body["config"] = config
        return body

    return deploy(AGENT, cx, name, file_, build, wait=wait, timeout=timeout, dry_run=dry_run)


__all__ = ["agent_group", "chat", "print_json"]
