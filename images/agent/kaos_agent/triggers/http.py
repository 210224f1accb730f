"""``POST /v1/triggers/{name}``: a signed delivery starts one A2A task, answered 202 with
its id; every refusal starts nothing and is the service's JSON error.

In order: an unknown trigger is 404 (``unknown_trigger``); the body is read within the
app's limit; the signature and its timestamp are checked (401 ``invalid_signature`` or
``stale_timestamp``: ``kaos_agent.triggers.signature``); the delivery needs an id (400);
the body must be JSON (400, the edge's rules: ``kaos_core.http.body``) and the message
rendered from it not blank (400, ``kaos_agent.triggers.template``); a stopping replica
answers 503. Then the delivery is admitted (``kaos_agent.triggers.deliveries``: 409
``replayed_delivery``, 429 ``rate_limited`` with ``Retry-After``) and its task started
(``kaos_agent.triggers.start``); a task that could not start un-records its delivery, so
the sender may retry with the same id. Each delivery is counted once in
``kaos_agent_triggers_total`` (``kaos_agent.triggers.metrics``).

``setup_triggers`` adds the route, and the delivery log's cleanup context (opened only
when triggers are configured), to the agent's application.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from aiohttp import web
from kaos_core.errors import BadRequest, KaosError
from kaos_core.http import REGISTRY_KEY
from kaos_core.http.body import decode_json, read_body
from kaos_core.http.middleware import request_id
from prometheus_client import Counter

from kaos_agent.a2a.server import A2AServer
from kaos_agent.settings import AgentSettings, TaskStoreSettings, Trigger, TriggerSettings
from kaos_agent.triggers.deliveries import Delivery, DeliveryLog
from kaos_agent.triggers.metrics import STARTED, UNKNOWN, triggers_counter
from kaos_agent.triggers.signature import (
    ReplayedDelivery,
    TriggerRateLimited,
    UnknownTrigger,
    delivery_id,
    verify,
)
from kaos_agent.triggers.start import owner, start_task, trigger_context
from kaos_agent.triggers.stores import build_delivery_log
from kaos_agent.triggers.template import render

log = logging.getLogger(__name__)

ROUTE = "/v1/triggers/{name}"


@dataclass(frozen=True)
class Triggers:
    """What the route needs: the triggers, whom their tasks belong to, the A2A server."""

    settings: TriggerSettings
    task_store: TaskStoreSettings
    owner: str
    a2a: Callable[[], A2AServer]
    counter: Counter
    clock: Callable[[], float]


TRIGGERS_KEY = web.AppKey("agent_triggers", Triggers)
DELIVERIES_KEY = web.AppKey("agent_trigger_deliveries", DeliveryLog)


def setup_triggers(
    app: web.Application,
    settings: AgentSettings,
    a2a: Callable[[], A2AServer],
    *,
    clock: Callable[[], float] = time.time,
) -> None:
    """Serve ``settings.webhooks`` on ``app``; ``a2a`` gives the started app's A2A server."""
    app[TRIGGERS_KEY] = Triggers(
        settings=settings.webhooks,
        task_store=settings.task_store,
        owner=owner(settings),
        a2a=a2a,
        counter=triggers_counter(app[REGISTRY_KEY]),
        clock=clock,
    )
    app.cleanup_ctx.append(_deliveries_ctx)
    app.router.add_post(ROUTE, _deliver)


async def _deliveries_ctx(app: web.Application) -> AsyncIterator[None]:
    triggers = app[TRIGGERS_KEY]
    if not triggers.settings.triggers:
        yield
        return
    deliveries = build_delivery_log(triggers.task_store, clock=triggers.clock)
    await deliveries.start()
    app[DELIVERIES_KEY] = deliveries
    log.info("webhook triggers ready", extra={"count": len(triggers.settings.triggers)})
    try:
        yield
    finally:
        await deliveries.close()


async def _deliver(request: web.Request) -> web.Response:
    triggers = request.app[TRIGGERS_KEY]
    name = request.match_info["name"]
    trigger = triggers.settings.get(name)
    if trigger is None:
        triggers.counter.labels(UNKNOWN, UnknownTrigger.code).inc()
        raise UnknownTrigger()
    try:
        task_id = await _start(request, triggers, trigger)
    except KaosError as exc:
        triggers.counter.labels(name, exc.code).inc()
        log.info("trigger delivery refused", extra={"trigger": name, "code": exc.code})
        raise
    triggers.counter.labels(name, STARTED).inc()
    return web.json_response({"taskId": task_id}, status=202)


async def _start(request: web.Request, triggers: Triggers, trigger: Trigger) -> str:
    body = await read_body(request)
    signed = verify(
        triggers.settings.secret(trigger.name), request.headers, body, now=triggers.clock()
    )
    delivery = Delivery(trigger.name, delivery_id(request.headers), signed.digest)
    text = render(trigger.message, decode_json(body))
    if not text.strip():
        raise BadRequest("the trigger's message is blank for this payload", code="blank_message")
    server = triggers.a2a()
    server.runs.check_open()  # a stopping replica records nothing
    deps = trigger_context(triggers.owner, trigger.name, delivery.id, request_id(request))
    deliveries = request.app[DELIVERIES_KEY]
    verdict = await deliveries.admit(delivery, max_per_minute=trigger.max_per_minute)
    if verdict.replayed:
        raise ReplayedDelivery()
    if not verdict.admitted:
        raise TriggerRateLimited(verdict.retry_after)
    try:
        task_id = await start_task(server, text, deps)
    except KaosError:
        with contextlib.suppress(KaosError):
            await deliveries.forget(delivery)
        raise
    log.info(
        "trigger delivery started a task",
        extra={"trigger": trigger.name, "delivery": delivery.id, "task": task_id},
    )
    return task_id
