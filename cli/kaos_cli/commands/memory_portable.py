"""``kaos memory export|import|migrate``: a store's memory in the portable format, moved.

``export`` streams ``POST /v1/export`` (JSON Lines, ``docs/memory/export-format.md``) of
the whole store, one principal's or one agent's memory into a file, written beside it and
renamed only once the stream ended complete (a broken transfer leaves no file that looks
whole). ``import`` sends a file to ``POST /v1/import``, which checks every line before it
writes any, and skips records it already holds; ``--from mem0`` sends Mem0's ``get_all``
answer instead, with ``--map`` naming how Mem0's ids become KAOS attribution. ``migrate``
pipes one store's export into another's import without a file: from a local store to an
external one, or from a store in the single-table pgvector layout to a new one.

They reach the service as the other memory commands do (``--store`` through a
port-forward, or ``--url``) and present the kubeconfig user's credential: a secured store
admits an export for ``get`` and an import for ``create`` on ``memorystores/data``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import click
from kaos_core.errors import BadRequest
from kaos_core.wire import AUTHORIZATION_HEADER, agent_identity

from kaos_cli.commands.common import Cx, common_options, complete_resource
from kaos_cli.commands.reach import forwarded
from kaos_cli.kinds import MEMORY_PORT, MEMORYSTORE
from kaos_cli.kubectl.credential import kube_credential
from kaos_cli.kubectl.sync import Kube
from kaos_cli.output import print_json, print_yaml, table
from kaos_cli.tools import EXIT_ENVIRONMENT, CliError

NDJSON = "application/x-ndjson"
CHUNK = 64 * 1024
MAPPED = ("principal", "agent", "session", "default_session")


# How these commands reach the service and present the credential is ``memory``'s (this
# module may not import it: it registers these commands).


@contextlib.contextmanager
def memory_url(args: argparse.Namespace) -> Iterator[str]:
    """``--url``, or a port-forward to the store's Service while the block runs."""
    if args.url:
        yield args.url
        return
    kube: Kube = args.cx.kube
    store = kube.get(MEMORYSTORE.resource, args.store, missing=MEMORYSTORE.missing())
    with forwarded(kube, MEMORYSTORE, store, MEMORY_PORT) as url:
        yield url


def _presents_credential(args: argparse.Namespace, url: str) -> bool:
    """To the port-forward, or to a --url over https or loopback (never in clear text
    across a network)."""
    if not args.url:
        return True
    parts = urlsplit(url)
    return parts.scheme == "https" or parts.hostname in ("127.0.0.1", "::1", "localhost")


def resolve_agent(agent: str | None, namespace: str | None) -> str | None:
    if agent is None:
        return None
    try:
        if agent.startswith("kaos://"):
            return agent_identity(*agent.removeprefix("kaos://agent/").split("/", 1))
        if "/" in agent:
            return agent_identity(*agent.split("/", 1))
        return agent_identity(namespace or "default", agent)
    except (BadRequest, TypeError) as exc:
        raise CliError(
            f"--agent {agent}: not an agent name or kaos://agent/<ns>/<name>", EXIT_ENVIRONMENT
        ) from exc


def _headers(args: argparse.Namespace, url: str) -> dict[str, str]:
    if not _presents_credential(args, url):
        return {}
    credential = kube_credential(args.cx.kube)
    if credential.token is None:
        return {}
    return {AUTHORIZATION_HEADER: f"Bearer {credential.token}"}


async def _refused(resp: aiohttp.ClientResponse) -> CliError:
    text = await resp.text()
    try:
        error = json.loads(text)["error"]
        code, message = error["code"], error["message"]
    except (ValueError, KeyError, TypeError):
        code, message = "error", text.strip()[:200] or resp.reason
    return CliError(f"memory service refused ({resp.status} {code}): {message}")


def _scope(principal: str | None, agent: str | None) -> dict[str, Any]:
    if principal is not None and agent is not None:
        raise CliError("give --principal or --agent, not both", EXIT_ENVIRONMENT)
    if principal is not None:
        return {"level": "user", "principal": principal}
    if agent is not None:
        return {"level": "agent", "agent": agent}
    return {"level": "store"}


async def _export_stream(
    session: aiohttp.ClientSession, url: str, scope: dict[str, Any], hdrs: dict[str, str]
) -> AsyncIterator[bytes]:
    async with session.post(f"{url}/v1/export", json=scope, headers=hdrs) as resp:
        if resp.status != 200:
            raise await _refused(resp)
        try:
            async for chunk in resp.content.iter_chunked(CHUNK):
                yield chunk
        except aiohttp.ClientPayloadError as exc:
            raise CliError("the export broke off before its end: nothing was kept") from exc


async def _import(
    session: aiohttp.ClientSession,
    url: str,
    body: Any,
    hdrs: dict[str, str],
    query: dict[str, str],
    content_type: str,
) -> dict[str, Any]:
    headers = {**hdrs, "Content-Type": content_type}
    async with session.post(f"{url}/v1/import", data=body, params=query, headers=headers) as resp:
        if resp.status != 200:
            raise await _refused(resp)
        doc: dict[str, Any] = await resp.json()
        return doc


def _session(args: argparse.Namespace) -> aiohttp.ClientSession:
    # No total deadline: a store's export takes as long as it takes; a stalled read does not.
    timeout = aiohttp.ClientTimeout(total=None, sock_read=args.timeout, connect=args.timeout)
    return aiohttp.ClientSession(timeout=timeout)


def _run(coro: Any) -> Any:
    try:
        return asyncio.run(coro)
    except aiohttp.ClientError as exc:
        raise CliError(f"memory service failed: {exc}") from exc
    except TimeoutError as exc:
        raise CliError("memory service did not answer in time") from exc


def export_cmd(args: argparse.Namespace) -> int:
    scope = _scope(args.principal, resolve_agent(args.agent, args.namespace))
    target = Path(args.file)
    partial = target.with_name(target.name + ".partial")

    async def go(url: str) -> int:
        records = 0
        async with _session(args) as session:
            with partial.open("wb") as out:
                async for chunk in _export_stream(session, url, scope, _headers(args, url)):
                    out.write(chunk)
                    records += chunk.count(b"\n")
        return records - 1  # the header

    with memory_url(args) as url:
        try:
            records = _run(go(url))
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
    os.replace(partial, target)
    print(f"exported {records} records to {target}")
    return 0


def _mapping(items: tuple[str, ...]) -> dict[str, str]:
    query: dict[str, str] = {}
    for item in items:
        name, sep, template = item.partition("=")
        if not sep or name not in MAPPED:
            raise CliError(
                f"--map {item}: give ATTRIBUTE=TEMPLATE, ATTRIBUTE one of {', '.join(MAPPED)}",
                EXIT_ENVIRONMENT,
            )
        query[name] = template
    return query


async def _file_chunks(path: Path) -> AsyncIterator[bytes]:
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


def _print_imported(doc: dict[str, Any], args: argparse.Namespace) -> None:
    if args.cx.fmt != "table":
        (print_json if args.cx.fmt == "json" else print_yaml)(doc)
        return
    table(
        ["turns", "digests", "facts", "skipped"],
        [[doc["turns"], doc["digests"], doc["facts"], doc["skipped"]]],
    )
    if doc.get("reembedded"):
        print("facts were embedded with this store's embedding model")


def import_cmd(args: argparse.Namespace) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise CliError(f"{path}: no such file", EXIT_ENVIRONMENT)
    query: dict[str, str] = {}
    content_type = NDJSON
    if args.source == "mem0":
        query = {"source": "mem0", **_mapping(args.map)}
        content_type = "application/json"
    elif args.map:
        raise CliError("--map is for --from mem0", EXIT_ENVIRONMENT)

    async def go(url: str) -> dict[str, Any]:
        async with _session(args) as session:
            body = _file_chunks(path)
            return await _import(session, url, body, _headers(args, url), query, content_type)

    with memory_url(args) as url:
        doc = _run(go(url))
    _print_imported(doc, args)
    return 0


def _side(args: argparse.Namespace, store: str | None, url: str | None) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "store": store, "url": url, "agent": None})


def migrate_cmd(args: argparse.Namespace) -> int:
    source = _side(args, args.source_store, args.source_url)
    target = _side(args, args.target_store, args.target_url)
    for side, flag in ((source, "--from"), (target, "--to")):
        if bool(side.store) == bool(side.url):
            raise CliError(
                f"name each store once: {flag} STORE or {flag}-url URL", EXIT_ENVIRONMENT
            )

    async def go(source_url: str, target_url: str) -> dict[str, Any]:
        async with _session(args) as session:
            lines = _export_stream(
                session, source_url, {"level": "store"}, _headers(source, source_url)
            )
            return await _import(
                session, target_url, lines, _headers(target, target_url), {}, NDJSON
            )

    with memory_url(source) as source_url, memory_url(target) as target_url:
        doc = _run(go(source_url, target_url))
    _print_imported(doc, args)
    return 0


def _target(fn: Any) -> Any:
    fn = click.option("--url", default=None, help="memory service base URL instead of --store")(fn)
    fn = click.option(
        "--store",
        default=None,
        shell_complete=complete_resource(MEMORYSTORE.resource),
        help="MemoryStore name (reached by kubectl port-forward)",
    )(fn)
    return fn


def _timeout(fn: Any) -> Any:
    return click.option(
        "--timeout", type=float, default=60.0, show_default=True, help="seconds a read may stall"
    )(fn)


def _args(cx: Cx, **params: Any) -> argparse.Namespace:
    return argparse.Namespace(cx=cx, namespace=cx.kube.namespace, agent=None, **params)


def _one_target(params: dict[str, Any]) -> None:
    if bool(params.get("url")) == bool(params.get("store")):
        raise CliError("name the store: --store NAME or --url URL (one)", EXIT_ENVIRONMENT)


@click.command("export", help="Write a store's memory (or one principal's or agent's) to FILE.")
@click.option("-f", "--file", required=True, metavar="FILE", help="where to write the export")
@click.option("--principal", default=None, help="only this principal's memory")
@click.option(
    "--agent", "agent_name", default=None, help="only this agent's: NAME, NS/NAME or kaos://..."
)
@_timeout
@_target
@common_options(namespace_help="namespace of the store and of --agent NAME")
def export_command(cx: Cx, agent_name: str | None, **params: Any) -> int:
    _one_target(params)
    args = _args(cx, **params)
    args.agent = agent_name
    return export_cmd(args)


@click.command("import", help="Import FILE (an export, or with --from mem0 a Mem0 dump).")
@click.argument("file", metavar="FILE")
@click.option(
    "--from",
    "source",
    type=click.Choice(["kaos", "mem0"]),
    default="kaos",
    show_default=True,
    help="kaos: an export (JSON Lines); mem0: Mem0's get_all answer",
)
@click.option(
    "--map",
    "map",
    multiple=True,
    metavar="ATTRIBUTE=TEMPLATE",
    help="with --from mem0: principal, agent or session as a template over {user_id},"
    " {agent_id}, {run_id}, {id} (default principal={user_id} agent={agent_id}"
    " session={run_id}); default_session=NAME for memories without one",
)
@_timeout
@_target
@common_options(namespace_help="namespace of the store")
def import_command(cx: Cx, **params: Any) -> int:
    _one_target(params)
    return import_cmd(_args(cx, **params))


@click.command("migrate", help="Copy every record of one store into another (export | import).")
@click.option("--from", "source_store", default=None, metavar="STORE", help="source MemoryStore")
@click.option("--to", "target_store", default=None, metavar="STORE", help="target MemoryStore")
@click.option("--from-url", "source_url", default=None, help="source service URL instead")
@click.option("--to-url", "target_url", default=None, help="target service URL instead")
@_timeout
@common_options(namespace_help="namespace of both stores")
def migrate_command(cx: Cx, **params: Any) -> int:
    return migrate_cmd(_args(cx, **params))


def add_commands(group: click.Group) -> None:
    for command in (export_command, import_command, migrate_command):
        group.add_command(command)
