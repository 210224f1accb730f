"""``kaos usage``: the tokens agents used, by agent, user or day, for chargeback.

Each Agent answers ``GET /v1/usage`` from its usage ledger (``kaos_agent.usage``): one row
per (agent, user, UTC day) with input, output and total tokens and runs. This command asks
the named Agents (every Agent of the namespace when none is named), each through a
port-forward to its Service, or the agents at ``--url``; sums the rows ``--by`` agent, user
or day (every row as it is without ``--by``); and prints a table with a total, JSON
(``{"items": [...]}``, the agent's own shape) or CSV.
"""

from __future__ import annotations

import asyncio
import csv
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

import click

from kaos_cli.clients.agent_ops import AgentOps, UsageRecord
from kaos_cli.commands.agent_reach import agent_url, complete_agent, run, with_ops
from kaos_cli.commands.common import CONTEXT_SETTINGS, complete_contexts, complete_namespaces
from kaos_cli.kinds import AGENT
from kaos_cli.kubectl.sync import Kube
from kaos_cli.output import print_json, table
from kaos_cli.tools import CliError

COUNTS = ("inputTokens", "outputTokens", "totalTokens", "runs")
KEYS = ("agent", "user", "day")


def summed(rows: Sequence[dict[str, Any]], by: str | None) -> list[dict[str, Any]]:
    """``rows`` summed per value of ``by`` (``None``: each row as it is), in key order."""
    keys = KEYS if by is None else (by,)
    totals: dict[tuple[str, ...], dict[str, Any]] = {}
    for row in rows:
        key = tuple(str(row.get(k, "")) for k in keys)
        into = totals.setdefault(
            key, {**dict(zip(keys, key, strict=True)), **dict.fromkeys(COUNTS, 0)}
        )
        for count in COUNTS:
            value = row.get(count, 0)
            into[count] += value if isinstance(value, int) else 0
    order = (by,) if by is not None else ("day", "agent", "user")
    return sorted(totals.values(), key=lambda r: tuple(r[k] for k in order))


def total(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    return {count: sum(int(r[count]) for r in rows) for count in COUNTS}


def print_csv(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([row[c] for c in columns])


async def _gather(*each: Coroutine[Any, Any, list[UsageRecord]]) -> list[list[UsageRecord]]:
    return list(await asyncio.gather(*each))


def _rows(records: Sequence[UsageRecord]) -> list[dict[str, Any]]:
    return [dict(record.item) for record in records]


@click.command(
    "usage",
    context_settings=CONTEXT_SETTINGS,
    help="Tokens agents used, by agent, user or UTC day (for chargeback).",
)
@click.argument("agents", nargs=-1, shell_complete=complete_agent)
@click.option(
    "--since", default=None, metavar="YYYY-MM-DD", help="first day (default: 30 days ago)"
)
@click.option("--until", default=None, metavar="YYYY-MM-DD", help="last day (default: today, UTC)")
@click.option("--user", default=None, help="only this user (principal)")
@click.option(
    "--by",
    type=click.Choice(KEYS),
    default=None,
    help="sum the rows per agent, user or day (default: one row per agent, user and day)",
)
@click.option(
    "--url",
    "urls",
    multiple=True,
    metavar="URL",
    help="an agent's base URL instead of a port-forward (repeatable; no AGENT then)",
)
@click.option(
    "--token",
    default=None,
    envvar="KAOS_TOKEN",
    help="bearer token for the agents (env KAOS_TOKEN)",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(("table", "json", "csv")),
    default="table",
    show_default=True,
    help="output format",
)
@click.option(
    "--context",
    default=None,
    metavar="NAME",
    shell_complete=complete_contexts,
    help="kubeconfig context (default: the current one)",
)
@click.option(
    "-n",
    "--namespace",
    default=None,
    metavar="NS",
    shell_complete=complete_namespaces,
    help="namespace (default: the context's namespace)",
)
def usage_command(
    agents: tuple[str, ...],
    since: str | None,
    until: str | None,
    user: str | None,
    by: str | None,
    urls: tuple[str, ...],
    token: str | None,
    output: str,
    context: str | None,
    namespace: str | None,
) -> int:
    if urls and agents:
        raise CliError("name agents or give --url, not both")
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    async def usage(ops: AgentOps) -> list[UsageRecord]:
        return await ops.usage(since=since, until=until, user=user)

    one = with_ops(headers, usage)
    rows: list[dict[str, Any]] = []
    if urls:
        for found in run(_gather(*(one(u.rstrip("/")) for u in urls))):
            rows += _rows(found)
    else:
        kube = Kube(context=context, namespace=namespace)
        names = list(agents) or [item["metadata"]["name"] for item in kube.items(AGENT.resource)]
        for name in names:
            with agent_url(kube, name, None) as base:
                rows += _rows(run(one(base)))
    result = summed(rows, by)
    columns = [*(KEYS if by is None else (by,)), *COUNTS]
    if output == "json":
        print_json({"items": result})
    elif output == "csv":
        print_csv(result, columns)
    else:
        grand = {**dict.fromkeys(KEYS, ""), (by or "agent"): "TOTAL", **total(result)}
        table(
            [c if c in KEYS else _header(c) for c in columns],
            [[r[c] for c in columns] for r in [*result, grand]],
        )
    return 0


def _header(count: str) -> str:
    return {"inputTokens": "input", "outputTokens": "output", "totalTokens": "total"}.get(
        count, count
    )
