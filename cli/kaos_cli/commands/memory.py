"""``kaos memory recall|list|forget|audit``: an administrator's view into a MemoryStore
(``export|import|migrate`` live in ``memory_portable``).

The CLI speaks the memory contract through ``MemoryServiceClient``, either to ``--url``
or through a ``kubectl port-forward`` to the store's Service for the duration of the
command. Without ``--agent`` the request carries no agent identity: the admin path, which
may also use the ``store`` level and erase one principal across every agent and session
(``forget --principal bob``). A secured memory service admits it only for a Kubernetes
user RBAC allows (``get``/``delete`` on ``memorystores/data``), so the call presents the
kubeconfig context's own bearer credential (``kaos_cli.kubectl.credential``): always through
the port-forward, and to ``--url`` only over https or loopback. Output is a table per
tier, or with ``-o json|yaml`` the contract response itself; a forget prints the receipt
(its audit record id), which ``kaos memory audit`` lists.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import sys
from collections.abc import Iterator
from typing import Any, get_args
from urllib.parse import urlsplit

import aiohttp
import click
from kaos_core.errors import BadRequest
from kaos_core.memory.client import MemoryRequestRejected, MemoryServiceClient, MemoryUnavailable
from kaos_core.memory.contract import (
    ALL_TIERS,
    AuditAction,
    AuditRecord,
    AuditResponse,
    ForgetResponse,
    Level,
    ListResponse,
    RecallResponse,
    Tier,
)
from kaos_core.wire import agent_identity
from pydantic import ValidationError

from kaos_cli.commands.common import CONTEXT_SETTINGS, Cx, common_options, complete_resource
from kaos_cli.commands.memory_quarantine import CALLS as QUARANTINE_CALLS
from kaos_cli.commands.memory_quarantine import add_commands as _add_quarantine
from kaos_cli.commands.memory_quarantine import quarantine_call
from kaos_cli.commands.memory_receipts import save_receipt, verify_receipt_command
from kaos_cli.commands.reach import forwarded
from kaos_cli.kinds import MEMORY_PORT, MEMORYSTORE
from kaos_cli.kubectl.credential import KubeCredential, kube_credential
from kaos_cli.kubectl.forward import Unreachable
from kaos_cli.kubectl.sync import Kube
from kaos_cli.output import print_json, print_yaml, table, warn
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError


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
    if not args.store:
        raise CliError("name the store: --store NAME, or --url URL", EXIT_ENVIRONMENT)
    kube: Kube = args.cx.kube
    store = kube.get(MEMORYSTORE.resource, args.store, missing=MEMORYSTORE.missing())
    with forwarded(kube, MEMORYSTORE, store, MEMORY_PORT) as url:
        yield url


def _presents_credential(args: argparse.Namespace, url: str) -> bool:
    """Send the kubeconfig credential: an admin call, to the port-forward or a --url that
    is https or loopback (never in clear text across a network)."""
    if args.agent is not None:
        return False
    if not args.url:
        return True
    parts = urlsplit(url)
    return parts.scheme == "https" or parts.hostname in ("127.0.0.1", "::1", "localhost")


def _run(args: argparse.Namespace, call: str) -> Any:
    credential = KubeCredential()

    async def go(url: str) -> Any:
        nonlocal credential
        if _presents_credential(args, url):
            credential = kube_credential(args.cx.kube)
        async with MemoryServiceClient(
            url,
            agent_identity=resolve_agent(args.agent, args.namespace),
            timeout=args.timeout,
            failure_mode="strict",
            admin_credential=credential.token,
        ) as client:
            # Recall and list answer "degraded" on transport errors (memory is augmentation
            # for agents); an administrator needs to know the service is not there.
            if not await client.ready():
                raise Unreachable(
                    f"memory service at {url} is unreachable or not ready",
                    "it is unreachable or not ready",
                )
            if call in QUARANTINE_CALLS:
                return await quarantine_call(client, args, call)
            if call == "audit":
                return await client.audit(limit=args.limit, cursor=args.cursor, action=args.action)
            include = tiers(args)
            ident: dict[str, Any] = {"session_id": args.session, "principal": args.principal}
            if call == "recall":
                return await client.recall(
                    args.level,
                    args.query,
                    top_k=args.top_k,
                    include=include,
                    as_of=args.as_of,
                    history=args.history,
                    **ident,
                )
            if call == "list":
                return await client.list(
                    args.level,
                    include=include,
                    limit=args.limit,
                    cursor=args.cursor,
                    history=args.history,
                    **ident,
                )
            return await client.forget(args.level, **ident)

    with memory_url(args) as url:
        try:
            return asyncio.run(go(url))
        except MemoryRequestRejected as exc:
            refusal = f"memory service refused ({exc.status} {exc.code}): {exc.message}"
            if exc.status == 401 and credential.problem:
                # Why nothing (or nothing usable) was presented, and what to do.
                refusal += f"; {credential.problem}"
            raise CliError(refusal) from exc
        except MemoryUnavailable as exc:
            if isinstance(exc.__cause__, aiohttp.ClientError | TimeoutError):
                # No answer (not a 5xx): through a port-forward, the pod is named.
                raise Unreachable(f"memory service failed: {exc}", str(exc)) from exc
            raise CliError(f"memory service failed: {exc}") from exc
        except BadRequest as exc:
            raise CliError(exc.message) from exc
        except ValidationError as exc:
            # The request refused before it is sent (the contract's own checks).
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "request"
            raise CliError(f"{where}: {first['msg']}") from exc


def _dump(response: Any, args: argparse.Namespace) -> bool:
    """Print the contract response for ``-o json|yaml``; False for tables."""
    if args.cx.fmt == "table":
        return False
    document = response.model_dump(mode="json")
    (print_json if args.cx.fmt == "json" else print_yaml)(document)
    return True


def recall_cmd(args: argparse.Namespace) -> int:
    response: RecallResponse = _run(args, "recall")
    _print_read(response, args, scored=True)
    return 0


def list_cmd(args: argparse.Namespace) -> int:
    response: ListResponse = _run(args, "list")
    _print_read(response, args, scored=False)
    if args.cx.fmt == "table" and response.next_cursor:
        print(f"\nmore: --cursor {response.next_cursor}")
    return 0


def forget_cmd(args: argparse.Namespace) -> int:
    if args.level is None:
        # ``forget --principal bob``: that principal across every agent and session.
        if args.principal is None or args.agent is not None or args.session is not None:
            raise CliError(
                "give --level (without it, forget needs --principal alone: that principal"
                " across every agent and session of the store)",
                EXIT_ENVIRONMENT,
            )
        args.level = "user"
    response: ForgetResponse = _run(args, "forget")
    if args.receipt_out:
        save_receipt(args.receipt_out, response.signed_receipt)
    if not _dump(response, args):
        counts = response.forgotten
        table(
            ["tier", "forgotten"],
            [
                ["short_term", counts.short_term],
                ["medium_term", counts.medium_term],
                ["long_term", counts.long_term],
            ],
        )
        if response.receipt is not None:
            print(f"receipt: audit record {response.receipt} (kaos memory audit)")
        if args.receipt_out:
            print(f"signed receipt: {args.receipt_out} (kaos memory verify-receipt)")
    if response.degraded:
        warn("the erasure was degraded: some tier could not be reached")
    return 0


def audit_cmd(args: argparse.Namespace) -> int:
    response: AuditResponse = _run(args, "audit")
    if not _dump(response, args):
        table(
            [
                "id",
                "at",
                "action",
                "by",
                "level",
                "principal",
                "agent",
                "session",
                "turns",
                "digests",
                "facts",
                "skipped",
                "status",
            ],
            [_audit_row(r) for r in response.records],
        )
        if response.next_cursor:
            print(f"\nmore: --cursor {response.next_cursor}")
    return 0


def _audit_row(r: AuditRecord) -> list[object]:
    """A forget's rows erased and whether it is final; an export's or import's records
    moved and how it ended (its outcome). Turns, digests and facts are the short-, medium-
    and long-term tiers."""
    actor = r.actor.name or r.actor.kind
    action = r.action if r.source in (None, "kaos") else f"{r.action} ({r.source})"
    if r.moved is None:
        gone = r.forgotten
        counts: list[object] = [gone.short_term, gone.medium_term, gone.long_term, None]
        status: str | None = "final" if r.final else "pending"
    else:
        moved = r.moved
        counts = [moved.turns, moved.digests, moved.facts, moved.skipped]
        status = r.outcome
    return [
        r.id,
        r.at,
        action,
        actor if r.actor.verified else f"{actor} (unverified)",
        r.scope.level,
        r.scope.principal,
        r.scope.agent,
        r.scope.session,
        *counts,
        status,
    ]


def _print_read(response: RecallResponse, args: argparse.Namespace, *, scored: bool) -> None:
    if not _dump(response, args):
        include = set(tiers(args))
        if "long_term" in include:
            # ``source``: who the fact came from (its provenance), ``-`` for a fact stored
            # before provenance was recorded; -o json|yaml carries the whole provenance.
            headers = ["id", "text", "source", "user", "agent", "session", "created"]
            if scored:
                headers.insert(3, "score")
            # Retired versions are shown only when asked for: say until when each held.
            if getattr(args, "history", False):
                headers.append("valid to")
            rows = []
            for fact in response.long_term.facts:
                row: list[object] = [
                    fact.id,
                    fact.text,
                    "-" if fact.provenance is None else fact.provenance.source,
                    fact.user_id,
                    fact.agent_id,
                    fact.session_id,
                    fact.created_at,
                ]
                if scored:
                    row.insert(3, None if fact.score is None else f"{fact.score:.3f}")
                if getattr(args, "history", False):
                    row.append(fact.valid_to or "current")
                rows.append(row)
            print(f"long-term facts ({len(rows)}):")
            table(headers, rows, wrap=["text"])
        if "medium_term" in include:
            digest = response.medium_term
            version = "-" if digest.version is None else digest.version
            print(f"\ndigest (version {version}):")
            print(f"  {digest.summary}" if digest.summary else "  (none)")
        if "short_term" in include:
            window = response.short_term.window
            print(f"\nwindow ({len(window)} turns):")
            table(
                ["at", "role", "content"],
                [[t.at, t.role, t.content] for t in window],
                wrap=["content"],
            )
    if response.degraded:
        warn("the answer is degraded: the long-term store could not be reached")
    sys.stdout.flush()


@click.group(
    "memory",
    context_settings=CONTEXT_SETTINGS,
    help="Inspect or erase what a MemoryStore remembers (the administrator's view). Without "
    "--agent the request is the admin path, which may also use the store level; a secured "
    "store admits it for the kubeconfig user RBAC allows (get/delete on memorystores/data).",
)
def memory_group() -> None:
    pass


def _timeout_option() -> Any:
    return click.option(
        "--timeout", type=float, default=30.0, show_default=True, help="seconds per request"
    )


def _target_options() -> list[Any]:
    """How the command reaches the service: a URL, or a MemoryStore by port-forward."""
    return [
        click.option("--url", default=None, help="memory service base URL instead of --store"),
        click.option(
            "--store",
            default=None,
            shell_complete=complete_resource(MEMORYSTORE.resource),
            help="MemoryStore name (reached by kubectl port-forward)",
        ),
    ]


def _decorate(fn: Any, options: list[Any], namespace_help: str) -> Any:
    for option in options:
        fn = option(fn)
    return common_options(namespace_help=namespace_help)(fn)


def _store_options(fn: Any) -> Any:
    return _decorate(fn, [_timeout_option(), *_target_options()], "namespace of the store")


def _options(fn: Any, *, level_required: bool = True) -> Any:
    options = [
        _timeout_option(),
        click.option(
            "--agent",
            default=None,
            help="act as this agent: NAME (in -n), NAMESPACE/NAME or kaos://agent/NS/NAME",
        ),
        click.option("--principal", default=None, help="end-user subject (X-Principal)"),
        click.option("--session", default=None, help="session id (X-Session-Id)"),
        click.option(
            "--level",
            required=level_required,
            type=click.Choice(get_args(Level)),
            help="scope of the operation"
            + ("" if level_required else " (default with --principal alone: user)"),
        ),
        *_target_options(),
    ]
    return _decorate(fn, options, "namespace of the store and of --agent NAME")


def _include_option(fn: Any) -> Any:
    return click.option(
        "--include",
        multiple=True,
        type=click.Choice(ALL_TIERS),
        help="tier to include (repeatable; default all)",
    )(fn)


def _args(cx: Cx, **params: Any) -> argparse.Namespace:
    if params.get("url") and params.get("store"):
        raise CliError("give --store or --url, not both", EXIT_ENVIRONMENT)
    if not params.get("url") and not params.get("store"):
        raise CliError("name the store: --store NAME, or --url URL", EXIT_ENVIRONMENT)
    params["include"] = list(params.get("include") or []) or None
    return argparse.Namespace(cx=cx, namespace=cx.kube.namespace, **params)


@memory_group.command("recall", help="Relevance search plus the session's tiers.")
@click.option("--query", required=True, help="what to search for")
@click.option("--top-k", type=int, default=None, help="at most this many facts")
@click.option(
    "--as-of",
    default=None,
    metavar="TIME",
    help="the facts true at this ISO 8601 time (with its offset) instead of the current ones",
)
@click.option("--history", is_flag=True, help="every version of each fact, retired ones too")
@_include_option
@_options
def recall_command(cx: Cx, **params: Any) -> int:
    return recall_cmd(_args(cx, **params))


@memory_group.command("list", help="Every fact in the scope plus the session's tiers.")
@click.option("--limit", type=int, default=100, show_default=True, help="facts per page")
@click.option("--cursor", default=None, help="next_cursor of the previous page")
@click.option("--history", is_flag=True, help="retired versions of facts too")
@_include_option
@_options
def list_command(cx: Cx, **params: Any) -> int:
    return list_cmd(_args(cx, **params))


@memory_group.command(
    "forget",
    help="Erase one scope across all tiers; answers with a receipt (its audit record). With"
    " --principal alone: that principal across every agent and session of the store.",
)
@click.option("--receipt-out", default=None, metavar="FILE", help="save the signed receipt")
@functools.partial(_options, level_required=False)
def forget_command(cx: Cx, **params: Any) -> int:
    return forget_cmd(_args(cx, **params))


memory_group.add_command(verify_receipt_command)


@memory_group.command(
    "audit",
    help="The store's erasures, exports and imports, newest first: who, when, scope, records"
    " per tier, how each ended.",
)
@click.option("--limit", type=click.IntRange(1, 1000), default=100, show_default=True)
@click.option("--cursor", default=None, help="next cursor of the previous page")
@click.option(
    "--action", type=click.Choice(get_args(AuditAction)), default=None, help="only these records"
)
@_store_options
def audit_command(cx: Cx, **params: Any) -> int:
    params.setdefault("agent", None)
    return audit_cmd(_args(cx, **params))


# ``export``, ``import`` and ``migrate`` (``memory_portable``) build on this module's way of
# reaching the service, so they are imported once it is complete.
from kaos_cli.commands.memory_portable import add_commands as _add_portable  # noqa: E402

_add_portable(memory_group)
_add_quarantine(memory_group, run=_run, args_of=_args, options=_store_options)
