"""``GET /v1/audit``: the agent's audit trail, the latest matching entries in call order,
and the trail's place in the app: its log beside the task store, opened before the runs
start and closed after they end, and its retention sweep.

Who may read it: as every record set the agent serves (``kaos_agent.records.access``),
with RBAC's ``get`` on ``agents/audit`` of this Agent under ``AGENT_RBAC``.

The sweep deletes entries older than ``AGENT_AUDIT_RETENTION_DAYS`` at start and every
hour (``kaos_agent.records.sweeps``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

from aiohttp import web
from kaos_core.auth.invoke import AUDIT_SUBRESOURCE
from kaos_core.http import REGISTRY_KEY

from kaos_agent.audit.log import AuditLog
from kaos_agent.audit.record import Auditor, write_failures_counter
from kaos_agent.audit_trail.query import parse_query
from kaos_agent.audit_trail.stores import build_audit_log
from kaos_agent.audit_trail.wire import AuditItem, AuditList
from kaos_agent.auth import EdgeAuth
from kaos_agent.records.access import own_records
from kaos_agent.records.sweeps import Sleep, sweeping
from kaos_agent.settings import AgentSettings

ROUTE = "/v1/audit"


@dataclass(frozen=True)
class AuditTrail:
    """What the route and the sweep need beside the log."""

    agent: str
    retention_seconds: float
    auth: Callable[[], EdgeAuth | None]
    clock: Callable[[], float]
    sleep: Sleep


# The log (``AuditLog.append`` records an entry, ``query`` reads them); the recorder every
# tool call and delegation goes through.
AUDIT_KEY = web.AppKey("agent_audit", AuditLog)
AUDITOR_KEY = web.AppKey("agent_auditor", Auditor)
TRAIL_KEY = web.AppKey("agent_audit_trail", AuditTrail)


def setup_audit(
    app: web.Application,
    settings: AgentSettings,
    auth: Callable[[], EdgeAuth | None],
    *,
    clock: Callable[[], float] = time.time,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """Keep the audit trail of ``app`` and serve it; ``auth`` gives the started app's edge
    verification. Opens nothing until the app starts."""
    audit = build_audit_log(settings.task_store)
    audit.on_failure = write_failures_counter(app[REGISTRY_KEY]).inc
    app[AUDIT_KEY] = audit
    app[AUDITOR_KEY] = Auditor(audit, record_arguments=settings.audit.record_arguments, clock=clock)
    app[TRAIL_KEY] = AuditTrail(
        agent=settings.agent.name,
        retention_seconds=settings.audit.retention_seconds,
        auth=auth,
        clock=clock,
        sleep=sleep,
    )
    app.cleanup_ctx.append(_audit_ctx)
    app.router.add_get(ROUTE, _list)


async def _audit_ctx(app: web.Application) -> AsyncIterator[None]:
    audit, trail = app[AUDIT_KEY], app[TRAIL_KEY]

    def sweep() -> Awaitable[int]:
        return audit.sweep(trail.clock() - trail.retention_seconds)

    await audit.start()
    try:
        async with sweeping(sweep, "audit trail", sleep=trail.sleep):
            yield
    finally:
        await audit.close()


async def reader(auth: EdgeAuth | None, headers: Mapping[str, str]) -> str | None:
    """Whose entries the caller may read: ``None`` for every entry, else one principal's.
    Raises the edge's 401, 403 (``agent_not_granted``), 503 or 400."""
    return await own_records(auth, headers, AUDIT_SUBRESOURCE)


async def _list(request: web.Request) -> web.Response:
    trail = request.app[TRAIL_KEY]
    user = await reader(trail.auth(), request.headers)
    query = parse_query(request.query, {k: request.query.getall(k) for k in request.query})
    entries = await request.app[AUDIT_KEY].select(replace(query, user=user))
    answer = AuditList(items=[AuditItem.of(trail.agent, entry) for entry in entries])
    return web.json_response(answer.to_wire())
