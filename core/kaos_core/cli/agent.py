"""``kaos agent list|invoke``: see the cluster's agents and talk to one.

``list`` reads Agents through ``kubectl get agents.kaos.tools``. ``invoke`` sends one
OpenAI-style chat completion to the agent, through ``--url`` or a ``kubectl
port-forward`` to its Service, with the session id that lets the agent remember the
conversation; without ``--session`` a fresh one is made and printed for the next turn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp

from kaos_core.agent_env import PRINCIPAL_HEADER, SESSION_HEADER
from kaos_core.cli.output import print_json, table
from kaos_core.cli.portforward import port_forward, service_target
from kaos_core.cli.tools import CliError, find_tool, kubectl_json

AGENT_PORT = 8000


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agent = sub.add_parser("agent", help="list agents or talk to one")
    actions = agent.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="the Agents, with model, memory and phase")
    listing.add_argument("-n", "--namespace", default=None, help="only this namespace")
    listing.add_argument(
        "-A", "--all-namespaces", action="store_true", help="every namespace (the default)"
    )
    listing.add_argument("--json", action="store_true", help="print the Agent objects")
    listing.set_defaults(handler=list_cmd)

    invoke = actions.add_parser("invoke", help="send one message, print the answer")
    invoke.add_argument("name", help="Agent name")
    invoke.add_argument("message", help="the user message")
    invoke.add_argument("--session", help="session id, to continue a conversation")
    invoke.add_argument("--principal", help="end-user subject (X-Principal), for testing")
    invoke.add_argument("-n", "--namespace", default=None, help="namespace of the Agent")
    invoke.add_argument("--url", help="agent base URL instead of a port-forward")
    invoke.add_argument("--timeout", type=float, default=120.0, help="seconds to wait")
    invoke.add_argument("--json", action="store_true", help="print the completion response")
    invoke.set_defaults(handler=invoke_cmd)


def _ready(status: dict[str, Any]) -> str:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("status", "Unknown"))
    return "Unknown"


def list_cmd(args: argparse.Namespace) -> int:
    kubectl = find_tool("kubectl")
    scope = ["-n", args.namespace] if args.namespace and not args.all_namespaces else ["-A"]
    document = kubectl_json(kubectl, "get", "agents.kaos.tools", *scope)
    items: list[dict[str, Any]] = document.get("items", [])
    if args.json:
        print_json(items)
        return 0
    rows = []
    for item in sorted(items, key=lambda i: (i["metadata"]["namespace"], i["metadata"]["name"])):
        spec, status = item.get("spec") or {}, item.get("status") or {}
        memory = ((spec.get("config") or {}).get("memory")) or {}
        memory_text = memory.get("type", "local")
        if memory.get("memoryStore"):
            memory_text += f" ({memory['memoryStore']})"
        rows.append(
            [
                item["metadata"]["namespace"],
                item["metadata"]["name"],
                spec.get("modelAPI"),
                memory_text,
                ",".join((spec.get("agentNetwork") or {}).get("access") or []),
                status.get("phase"),
                _ready(status),
                status.get("endpoint"),
            ]
        )
    if not rows:
        print("no agents found")
        return 0
    table(
        ["namespace", "name", "modelapi", "memory", "delegates", "phase", "ready", "endpoint"],
        rows,
    )
    return 0


@contextlib.contextmanager
def agent_url(args: argparse.Namespace) -> Iterator[str]:
    if args.url:
        yield args.url
        return
    kubectl = find_tool("kubectl")
    ns_args = ["-n", args.namespace] if args.namespace else []
    agent = kubectl_json(kubectl, "get", "agents.kaos.tools", args.name, *ns_args)
    endpoint = (agent.get("status") or {}).get("endpoint")
    service, port = service_target(endpoint, args.name, AGENT_PORT)
    with port_forward(kubectl, args.namespace, service, port) as url:
        yield url


async def chat(
    url: str,
    model: str,
    message: str,
    *,
    session: str,
    principal: str | None,
    request_timeout: float,
) -> dict[str, Any]:
    """One non-streaming chat completion; the parsed response document."""
    headers = {SESSION_HEADER: session}
    if principal:
        headers[PRINCIPAL_HEADER] = principal
    body = {"model": model, "messages": [{"role": "user", "content": message}], "stream": False}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=request_timeout)) as http,
            http.post(url.rstrip("/") + "/v1/chat/completions", json=body, headers=headers) as resp,
        ):
            payload: Any = await resp.json(content_type=None)
            if resp.status >= 400:
                error = payload.get("error") if isinstance(payload, dict) else None
                detail = error.get("message") if isinstance(error, dict) else payload
                raise CliError(f"agent answered {resp.status}: {detail}")
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        raise CliError(f"agent at {url} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(payload, dict):
        raise CliError(f"agent at {url} answered no JSON object")
    return payload


def invoke_cmd(args: argparse.Namespace) -> int:
    session = args.session or f"cli-{uuid.uuid4().hex[:12]}"
    with agent_url(args) as url:
        payload = asyncio.run(
            chat(
                url,
                args.name,
                args.message,
                session=session,
                principal=args.principal,
                request_timeout=args.timeout,
            )
        )
    if args.json:
        print_json(payload)
    else:
        try:
            answer = payload["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise CliError("agent answered without choices[0].message.content") from exc
        print(answer)
    if not args.session:
        sys.stderr.write(f"session: {session} (continue with --session {session})\n")
    return 0
