"""The agent's load endpoint as the autoscaler reads it: the whole Agent's A2A tasks from a
shared store that counts them, plus this replica's chat and autonomous runs; this
replica's own tasks (scope replica) from a store that cannot count, or fails to."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from kaos_agent.a2a.tasks import MemoryTaskStore, TaskStoreUnavailable
from kaos_agent.load import LOAD_PATH, AgentLoad, CountsWorking, agent_load, load_handler
from kaos_agent.metrics import AgentMetrics
from kaos_operator.desired.agent_scaling import LOAD_FIELD
from kaos_operator.desired.agent_scaling import LOAD_PATH as OPERATOR_LOAD_PATH
from prometheus_client import CollectorRegistry


class CountingStore:
    """A shared store's count, as the store answers it (the boundary of agent_load)."""

    def __init__(self, working: int | None) -> None:
        self.working = working

    async def count_working(self) -> int:
        if self.working is None:
            raise TaskStoreUnavailable()
        return self.working


def busy_metrics() -> AgentMetrics:
    """A replica with 2 A2A runs (its working tasks), 3 chat runs and 1 autonomous run."""
    metrics = AgentMetrics.create(CollectorRegistry())
    metrics.tasks_working.set(2)
    metrics.runs_in_flight.labels("a2a").set(2)
    metrics.runs_in_flight.labels("chat").set(3)
    metrics.runs_in_flight.labels("autonomous").set(1)
    return metrics


def test_the_operator_reads_the_field_and_path_the_agent_serves() -> None:
    assert LOAD_FIELD in AgentLoad.model_fields
    assert OPERATOR_LOAD_PATH == LOAD_PATH


async def test_a_shared_store_gives_the_whole_agent_tasks() -> None:
    answer = await agent_load(CountingStore(11), busy_metrics())
    # The store's 11 (this replica's 2 among them) plus this replica's 4 other runs.
    assert answer == AgentLoad(load=15, tasks=11, runs=4, scope="agent")


async def test_a_store_that_cannot_count_gives_this_replica() -> None:
    store = MemoryTaskStore()
    assert not isinstance(store, CountsWorking)
    answer = await agent_load(store, busy_metrics())
    assert answer == AgentLoad(load=6, tasks=2, runs=4, scope="replica")
    assert not answer.degraded


async def test_a_failing_store_degrades_to_this_replica() -> None:
    answer = await agent_load(CountingStore(None), busy_metrics())
    assert answer == AgentLoad(load=6, tasks=2, runs=4, scope="replica", degraded=True)


async def test_an_idle_replica_answers_zero_over_http() -> None:
    metrics = AgentMetrics.create(CollectorRegistry())
    stores: list[object] = []
    app = web.Application()
    app.router.add_get(LOAD_PATH, load_handler(lambda: stores[0] if stores else None, metrics))
    async with TestClient(TestServer(app)) as client:
        # Before the store starts: this replica's (nothing).
        resp = await client.get(LOAD_PATH)
        assert resp.status == 200
        assert await resp.json() == {
            "load": 0,
            "tasks": 0,
            "runs": 0,
            "scope": "replica",
            "degraded": False,
        }
        stores.append(CountingStore(7))
        body = await (await client.get(LOAD_PATH)).json()
        assert (body["load"], body["scope"]) == (7, "agent")
