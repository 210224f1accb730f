"""The operator process as an aiohttp app: health, readiness and metrics endpoints, with
the controller (behind leader election) as a background task owned by ``cleanup_ctx``.

Graceful shutdown is the app's: on SIGTERM ``run_service`` stops serving and runs the
cleanup, which lets running reconciles finish, releases the Lease for a fast handover
and closes the API client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from aiohttp import web
from kaos_core.http import READINESS_KEY, REGISTRY_KEY, create_base_app

from kaos_operator.controller import Controller
from kaos_operator.kube import KubeClient
from kaos_operator.leader import LeaderElector
from kaos_operator.metrics import OperatorMetrics
from kaos_operator.settings import OperatorSettings

log = logging.getLogger(__name__)

SETTINGS_KEY = web.AppKey("kaos_operator_settings", OperatorSettings)
CLIENT_KEY = web.AppKey("kaos_operator_client", KubeClient)
METRICS_KEY = web.AppKey("kaos_operator_metrics", OperatorMetrics)
STATE_KEY = web.AppKey("kaos_operator_state", dict)


class NotSynced(Exception):
    """The leader has not listed every resource yet."""

    readiness_reason = "NotSynced"


class LeaderElectionStalled(Exception):
    """The last attempt to acquire or renew the Lease failed (the log says why)."""

    readiness_reason = "LeaderElectionStalled"


def create_app(settings: OperatorSettings, *, client: KubeClient | None = None) -> web.Application:
    app = create_base_app("kaos-operator", limits=settings.limits, telemetry=settings.telemetry)
    app[SETTINGS_KEY] = settings
    app[METRICS_KEY] = OperatorMetrics.create(app[REGISTRY_KEY])
    app[STATE_KEY] = {"controller": None, "leading": False, "elector": None}
    if client is not None:
        app[CLIENT_KEY] = client
    app.cleanup_ctx.append(_kube_client)
    app.cleanup_ctx.append(_run_controller)

    async def controller_ready() -> None:
        # A standby is ready (it is doing its job: waiting); a leader once synced.
        ctl = app[STATE_KEY]["controller"]
        if app[STATE_KEY]["leading"] and (ctl is None or not ctl.synced):
            raise NotSynced()

    async def leader_election_progressing() -> None:
        # A standby watching another holder is progressing; a candidate whose requests
        # fail (no such namespace, forbidden, unreachable) is not, and says so here.
        elector = app[STATE_KEY]["elector"]
        if elector is not None and not elector.progressing:
            raise LeaderElectionStalled()

    app[READINESS_KEY].add("controller", controller_ready)
    app[READINESS_KEY].add("leader_election", leader_election_progressing)
    return app


async def _kube_client(app: web.Application) -> AsyncIterator[None]:
    owned = CLIENT_KEY not in app
    if owned:
        app[CLIENT_KEY] = await KubeClient.connect(
            app[SETTINGS_KEY].cluster.kubeconfig, metrics=app[METRICS_KEY].api
        )
    yield
    if owned:
        await app[CLIENT_KEY].close()


async def _run_controller(app: web.Application) -> AsyncIterator[None]:
    settings, client, metrics = app[SETTINGS_KEY], app[CLIENT_KEY], app[METRICS_KEY]
    state = app[STATE_KEY]

    async def lead() -> None:
        ctl = Controller(client, settings, metrics)
        state["controller"] = ctl
        try:
            await ctl.run()
        finally:
            state["controller"] = None

    def on_change(leading: bool) -> None:
        state["leading"] = leading
        metrics.leader.set(1 if leading else 0)

    elector: LeaderElector | None = None
    if settings.election.enabled:
        leader = settings.leader
        log.info(
            "campaigning for the leader Lease",
            extra={
                "namespace": leader.namespace,
                "lease": leader.lease_name,
                "identity": leader.identity,
            },
        )
        elector = LeaderElector(client, leader, on_change)
        state["elector"] = elector
        task = asyncio.create_task(elector.run(lead), name="kaos-elector")
    else:
        on_change(True)
        task = asyncio.create_task(lead(), name="kaos-controller")
    yield
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    if elector is not None:
        await elector.release()
