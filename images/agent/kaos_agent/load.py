"""The agent's load, for the autoscaler: ``GET /load`` answers ``{"load": n, ...}``.

KEDA's ``metrics-api`` scaler (the ScaledObject the operator makes for an Agent's
``spec.autoscaling``) reads this endpoint through the Agent's Service, so one replica,
any of them, answers each poll. Its target is an ``AverageValue``: KEDA's
HorizontalPodAutoscaler takes the value as the whole Agent's and asks for
ceil(value / targetRunsPerReplica) replicas. So ``load`` must be the Agent's total
whichever replica answers, not the answering replica's share (that would make the scaler
divide a share by the replicas once more, and stall):

- ``tasks``: A2A tasks working in the whole Agent, counted in the task store its replicas
  share (``CountsWorking``: the external store). Every replica counts the same rows, the
  queued ones too: tasks whose replica died and that wait for another to claim them.
  A store that is not shared (memory) or cannot count gives this replica's own working
  tasks, and ``scope`` says ``replica``.
- ``runs``: this replica's chat completions and autonomous runs in flight. They are not
  kept in any store, so they are the answering replica's own: under load made of chat
  completions alone the value is a sample of one replica's, and the scaler reaches only
  ceil(per-replica runs / target) replicas.

A store that fails to count (or to within ``COUNT_TIMEOUT``) answers with this replica's
own tasks and ``degraded`` set, rather than an error the scaler would read as "no metric"
and freeze on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Literal, Protocol, runtime_checkable

from aiohttp import web
from prometheus_client import Gauge
from pydantic import BaseModel, Field

from kaos_agent.a2a.tasks import TaskStoreUnavailable
from kaos_agent.metrics import AgentMetrics

log = logging.getLogger(__name__)

LOAD_PATH = "/load"
# Within KEDA's own timeout of a metrics-api request (3 s by default).
COUNT_TIMEOUT = 2.0
# The runs_in_flight entries the task store does not hold (its A2A runs are ``tasks``).
_OWN_ENTRIES = ("chat", "autonomous")


@runtime_checkable
class CountsWorking(Protocol):
    """A task store shared by the Agent's replicas that counts its working tasks."""

    async def count_working(self) -> int:
        """Working tasks of the whole Agent, those waiting to be claimed included."""
        ...


class AgentLoad(BaseModel):
    """The answer of ``GET /load``."""

    load: int = Field(description="tasks + runs: what the autoscaler's target divides.")
    tasks: int = Field(description="A2A tasks working (the whole Agent's when scope is agent).")
    runs: int = Field(description="This replica's chat and autonomous runs in flight.")
    scope: Literal["agent", "replica"] = Field(
        description="agent: tasks counted in the shared task store; replica: this one's."
    )
    degraded: bool = Field(
        default=False, description="The shared store could not count: tasks are this replica's."
    )


def _value(gauge: Gauge, label: str | None = None) -> int:
    """A gauge's value (one label's, when given), read through its public collect()."""
    total = 0.0
    for family in gauge.collect():
        for sample in family.samples:
            if label is None or label in sample.labels.values():
                total += sample.value
    return int(total)


async def agent_load(store: object, metrics: AgentMetrics) -> AgentLoad:
    """The load as ``GET /load`` answers it, from the task store and the gauges."""
    runs = sum(_value(metrics.runs_in_flight, entry) for entry in _OWN_ENTRIES)
    own_tasks = _value(metrics.tasks_working)
    if not isinstance(store, CountsWorking):
        return AgentLoad(load=own_tasks + runs, tasks=own_tasks, runs=runs, scope="replica")
    try:
        async with asyncio.timeout(COUNT_TIMEOUT):
            tasks = await store.count_working()
    except (TaskStoreUnavailable, TimeoutError) as exc:
        log.warning("task store could not count working tasks: %s", type(exc).__name__)
        return AgentLoad(
            load=own_tasks + runs, tasks=own_tasks, runs=runs, scope="replica", degraded=True
        )
    return AgentLoad(load=tasks + runs, tasks=tasks, runs=runs, scope="agent")


def load_handler(
    store: Callable[[], object], metrics: AgentMetrics
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The ``GET /load`` handler; ``store`` gives the running task store (it starts after
    the routes are added)."""

    async def handle(request: web.Request) -> web.Response:
        answer = await agent_load(store(), metrics)
        return web.json_response(answer.model_dump(mode="json"))

    return handle
