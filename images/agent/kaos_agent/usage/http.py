"""``GET /v1/usage``, and the usage ledger's life in the agent's application.

``setup_usage`` adds the ledger's cleanup context (opened beside the task store, swept
of days past ``AGENT_USAGE_RETENTION_DAYS`` at start and every hour), the ``Accounting``
the runtime is given (``ACCOUNTING_KEY``) and the route. The route answers
``{"items": [{agent, user, day, inputTokens, outputTokens, totalTokens, runs}]}`` by day
then user (``kaos_agent.usage.query`` for its parameters). Who may read it: as every
record set the agent serves (``kaos_agent.records.access``), with RBAC's ``get`` on
``agents/usage`` of this Agent under ``AGENT_RBAC``; without RBAC a user asking for
another's rows is 403 ``usage_not_granted``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass

from aiohttp import web
from kaos_core.auth.invoke import USAGE_SUBRESOURCE
from kaos_core.errors import Forbidden
from kaos_core.http import REGISTRY_KEY

from kaos_agent.auth import EdgeAuth
from kaos_agent.records.access import own_records
from kaos_agent.records.sweeps import sweeping
from kaos_agent.settings import AgentSettings
from kaos_agent.usage.accounting import UsageAccounting, UsageMetrics
from kaos_agent.usage.ledger import Ledger, utc_day
from kaos_agent.usage.query import parse_query
from kaos_agent.usage.stores import build_ledger

ROUTE = "/v1/usage"


@dataclass(frozen=True)
class Usage:
    """What the ledger and the route need, fixed when the app is built."""

    settings: AgentSettings
    auth: Callable[[], EdgeAuth | None]
    metrics: UsageMetrics
    clock: Callable[[], float]


USAGE_KEY = web.AppKey("agent_usage", Usage)
LEDGER_KEY = web.AppKey("agent_usage_ledger", Ledger)
ACCOUNTING_KEY = web.AppKey("agent_accounting", UsageAccounting)


def setup_usage(
    app: web.Application,
    settings: AgentSettings,
    auth: Callable[[], EdgeAuth | None],
    *,
    clock: Callable[[], float] = time.time,
) -> None:
    """Count ``settings``' agent's tokens on ``app``; ``auth`` gives the started app's edge
    verification. Its cleanup context must come before the runtime's (which takes
    ``app[ACCOUNTING_KEY]``)."""
    app[USAGE_KEY] = Usage(settings, auth, UsageMetrics.create(app[REGISTRY_KEY]), clock)
    app.cleanup_ctx.append(_ledger_ctx)
    app.router.add_get(ROUTE, _usage)


async def _ledger_ctx(app: web.Application) -> AsyncIterator[None]:
    usage = app[USAGE_KEY]
    settings = usage.settings
    ledger = build_ledger(settings.task_store)

    def sweep() -> Awaitable[None]:
        return ledger.sweep(utc_day(usage.clock() - settings.tokens.retention_seconds))

    await ledger.start()
    try:
        app[LEDGER_KEY] = ledger
        app[ACCOUNTING_KEY] = UsageAccounting(
            settings.agent.name, settings.tokens, ledger, usage.metrics, clock=usage.clock
        )
        async with sweeping(sweep, "usage ledger"):
            yield
    finally:
        await ledger.close()


async def _usage(request: web.Request) -> web.Response:
    usage = request.app[USAGE_KEY]
    query = parse_query(request.query, usage.clock())
    user = await reader(usage.auth(), request.headers, query.user)
    rows = await request.app[LEDGER_KEY].query(
        usage.settings.agent.name, query.since, query.until, user
    )
    return web.json_response({"items": [row.wire() for row in rows]})


async def reader(
    auth: EdgeAuth | None, headers: Mapping[str, str], asked: str | None
) -> str | None:
    """The user whose rows the caller may read (``None``: everyone's, else ``asked``'s
    only); raises 401, 403 or 503 as the edge does."""
    own = await own_records(auth, headers, USAGE_SUBRESOURCE)
    if own is None:
        return asked
    if asked not in (None, own):
        raise Forbidden(
            "without RBAC (AGENT_RBAC) a user reads only their own usage",
            code="usage_not_granted",
        )
    return own
