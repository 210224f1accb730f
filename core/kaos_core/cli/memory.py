"""``kaos memory recall|list|forget``: an administrator's view into a MemoryStore.

The CLI speaks the memory contract through ``MemoryServiceClient``, either to ``--url``
or through a ``kubectl port-forward`` to the store's Service for the duration of the
command. Without ``--agent`` the request carries no agent identity: the trusted admin
path that may also use the ``store`` level. Output is a table per tier, or with
``--json`` the contract response itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Iterator
from typing import Any, get_args

from kaos_core.cli.output import print_json, table, warn
from kaos_core.cli.portforward import port_forward, service_target
from kaos_core.cli.tools import EXIT_ENVIRONMENT, CliError, find_tool, kubectl_json
from kaos_core.errors import BadRequest
from kaos_core.memory.client import MemoryRequestRejected, MemoryServiceClient, MemoryUnavailable
from kaos_core.memory.contract import (
    ALL_TIERS,
    ForgetResponse,
    Level,
    ListResponse,
    RecallResponse,
    Tier,
)
from kaos_core.memory.identity import agent_identity

MEMORY_PORT = 8080


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = sub.add_parser("memory", help="inspect or erase what a MemoryStore remembers")
    actions = memory.add_subparsers(dest="action", required=True, metavar="ACTION")

    recall = actions.add_parser("recall", help="relevance search plus the session's tiers")
    _common(recall)
    recall.add_argument("--query", required=True, help="what to search for")
    recall.add_argument("--top-k", type=int, default=None, help="at most this many facts")
    _include(recall)
    recall.set_defaults(handler=recall_cmd)

    listing = actions.add_parser("list", help="every fact in the scope plus the session's tiers")
    _common(listing)
    listing.add_argument("--limit", type=int, default=100, help="facts per page (default 100)")
    listing.add_argument("--cursor", default=None, help="next_cursor of the previous page")
    _include(listing)
    listing.set_defaults(handler=list_cmd)

    forget = actions.add_parser("forget", help="erase one scope across all tiers")
    _common(forget)
    forget.set_defaults(handler=forget_cmd)


def _common(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--store", help="MemoryStore name (reached by kubectl port-forward)")
    target.add_argument("--url", help="memory service base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument(
        "--level", required=True, choices=get_args(Level), help="scope of the operation"
    )
    parser.add_argument("--session", help="session id (X-Session-Id)")
    parser.add_argument("--principal", help="end-user subject (X-Principal)")
    parser.add_argument(
        "--agent",
        help="act as this agent: NAME (in --namespace), NAMESPACE/NAME or kaos://agent/NS/NAME",
    )
    parser.add_argument(
        "-n", "--namespace", default=None, help="namespace of the store and of --agent NAME"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    parser.add_argument("--json", action="store_true", help="print the contract response")


def _include(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--include",
        action="append",
        choices=ALL_TIERS,
        default=None,
        help="tier to include (repeatable; default all)",
    )


def resolve_agent(agent: str | None, namespace: str | None) -> str | None:
    """The X-Agent-Identity for ``--agent``, validated before anything is sent."""
    if agent is None:
        return None
    try:
        if agent.startswith("kaos://"):
            return agent_identity(*agent.removeprefix("kaos://agent/").split("/", 1))
        if "/" in agent:
            ns, name = agent.split("/", 1)
            return agent_identity(ns, name)
        return agent_identity(namespace or "default", agent)
    except (BadRequest, TypeError) as exc:
        raise CliError(
            f"--agent {agent}: not an agent name or kaos://agent/<ns>/<name>", EXIT_ENVIRONMENT
        ) from exc


def tiers(args: argparse.Namespace) -> tuple[Tier, ...]:
    """``--include``, else every tier with a session and only long-term without one (the
    conversational tiers are per session: the service refuses them without one)."""
    chosen = getattr(args, "include", None)
    if chosen:
        return tuple(chosen)
    if args.session and args.level != "store":
        return ALL_TIERS
    return ("long_term",)


@contextlib.contextmanager
def memory_url(args: argparse.Namespace) -> Iterator[str]:
    """``--url``, or a port-forward to the store's Service while the block runs."""
    if args.url:
        yield args.url
        return
    kubectl = find_tool("kubectl")
    ns_args = ["-n", args.namespace] if args.namespace else []
    store = kubectl_json(kubectl, "get", "memorystores.kaos.tools", args.store, *ns_args)
    endpoint = (store.get("status") or {}).get("endpoint")
    service, port = service_target(endpoint, args.store, MEMORY_PORT)
    with port_forward(kubectl, args.namespace, service, port) as url:
        yield url


def _run(args: argparse.Namespace, call: str) -> Any:
    async def go(url: str) -> Any:
        async with MemoryServiceClient(
            url,
            agent_identity=resolve_agent(args.agent, args.namespace),
            timeout=args.timeout,
            failure_mode="strict",
        ) as client:
            # Recall and list answer "degraded" on transport errors (memory is augmentation
            # for agents); an administrator needs to know the service is not there.
            if not await client.ready():
                raise CliError(f"memory service at {url} is unreachable or not ready")
            include = tiers(args)
            ident: dict[str, Any] = {"session_id": args.session, "principal": args.principal}
            if call == "recall":
                return await client.recall(
                    args.level, args.query, top_k=args.top_k, include=include, **ident
                )
            if call == "list":
                return await client.list(
                    args.level, include=include, limit=args.limit, cursor=args.cursor, **ident
                )
            return await client.forget(args.level, **ident)

    with memory_url(args) as url:
        try:
            return asyncio.run(go(url))
        except MemoryRequestRejected as exc:
            refusal = f"memory service refused ({exc.status} {exc.code}): {exc.message}"
            raise CliError(refusal) from exc
        except MemoryUnavailable as exc:
            raise CliError(f"memory service failed: {exc}") from exc
        except BadRequest as exc:
            raise CliError(exc.message) from exc


def recall_cmd(args: argparse.Namespace) -> int:
    response: RecallResponse = _run(args, "recall")
    _print_read(response, args, scored=True)
    return 0


def list_cmd(args: argparse.Namespace) -> int:
    response: ListResponse = _run(args, "list")
    _print_read(response, args, scored=False)
    if not args.json and response.next_cursor:
        print(f"\nmore: --cursor {response.next_cursor}")
    return 0


def forget_cmd(args: argparse.Namespace) -> int:
    response: ForgetResponse = _run(args, "forget")
    if args.json:
        print_json(response.model_dump(mode="json"))
    else:
        counts = response.forgotten
        table(
            ["tier", "forgotten"],
            [
                ["short_term", counts.short_term],
                ["medium_term", counts.medium_term],
                ["long_term", counts.long_term],
            ],
        )
    if response.degraded:
        warn("the erasure was degraded: some tier could not be reached")
    return 0


def _print_read(response: RecallResponse, args: argparse.Namespace, *, scored: bool) -> None:
    if args.json:
        print_json(response.model_dump(mode="json"))
    else:
        include = set(tiers(args))
        if "long_term" in include:
            headers = ["id", "text", "user", "agent", "session", "created"]
            if scored:
                headers.insert(2, "score")
            rows = []
            for fact in response.long_term.facts:
                row: list[object] = [
                    fact.id, fact.text, fact.user_id, fact.agent_id, fact.session_id,
                    fact.created_at,
                ]  # fmt: skip
                if scored:
                    row.insert(2, None if fact.score is None else f"{fact.score:.3f}")
                rows.append(row)
            print(f"long-term facts ({len(rows)}):")
            table(headers, rows)
        if "medium_term" in include:
            digest = response.medium_term
            version = "-" if digest.version is None else digest.version
            print(f"\ndigest (version {version}):")
            print(f"  {digest.summary}" if digest.summary else "  (none)")
        if "short_term" in include:
            window = response.short_term.window
            print(f"\nwindow ({len(window)} turns):")
            table(["at", "role", "content"], [[t.at, t.role, t.content] for t in window])
    if response.degraded:
        warn("the answer is degraded: the long-term store could not be reached")
    sys.stdout.flush()
