"""The A2A task stores' semantics, the same on each backend: the in-process store, SQLite
(a real file) and PostgreSQL (a fresh database per test). Time is the store's injected
clock, so leases lapse and retention passes without waiting."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from a2a.types import a2a_pb2 as pb
from kaos_agent.a2a.pg_store import PostgresTaskStore
from kaos_agent.a2a.sqlite_store import SqliteTaskStore
from kaos_agent.a2a.tasks import (
    LAPSED_LEASE,
    Listing,
    MemoryTaskStore,
    TaskStore,
    canceled,
    completed,
    failed,
    new_task,
    resume_limit,
)
from kaos_agent.settings import AgentSettings
from kaos_core.settings import SettingsError

from tests.support.task_stores import LEASE, Clock

StoreMaker = Callable[[Clock], TaskStore]


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreMaker:
    if request.param == "memory":
        return lambda clock: MemoryTaskStore(lease_seconds=LEASE, clock=clock)
    if request.param == "sqlite":
        return lambda clock: SqliteTaskStore(
            tmp_path / "tasks" / "tasks.db", lease_seconds=LEASE, clock=clock
        )
    dsn = request.getfixturevalue("pg_dsn")
    return lambda clock: PostgresTaskStore(dsn, lease_seconds=LEASE, clock=clock)


@pytest.fixture
async def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(make_store: StoreMaker, clock: Clock) -> AsyncIterator[TaskStore]:
    made = make_store(clock)
    await made.start()
    try:
        yield made
    finally:
        await made.close()


def message(text: str = "hello") -> pb.Message:
    return pb.Message(message_id="m1", role=pb.ROLE_USER, parts=[pb.Part(text=text)])


async def created(
    store: TaskStore, principal: str | None, *, context: str = "c1", runner: str = "pod-a"
) -> pb.Task:
    task = new_task(message(), context_id=context, metadata={"kaos": {"principal": principal}})
    await store.create(task, principal=principal, runner=runner)
    return task


async def test_a_task_of_another_principal_does_not_exist(store: TaskStore) -> None:
    mine = await created(store, "alice")
    anonymous = await created(store, None, context="c2")

    got = await store.get(mine.id, "alice")
    assert got is not None and got == mine
    assert await store.get(mine.id, "mallory") is None
    assert await store.get(mine.id, None) is None
    assert (await store.cancel(mine.id, "mallory")).task is None
    assert (await store.get(mine.id, "alice")).status.state == pb.TASK_STATE_WORKING  # type: ignore[union-attr]
    # An anonymous task is anyone's.
    assert await store.get(anonymous.id, "mallory") == anonymous

    page, total = await store.list_tasks(Listing("alice", None, 10))
    assert {t.id for t in page} == {mine.id, anonymous.id} and total == 2
    page, total = await store.list_tasks(Listing("mallory", None, 10))
    assert [t.id for t in page] == [anonymous.id] and total == 1
    page, total = await store.list_tasks(Listing("alice", "c1", 10))
    assert [t.id for t in page] == [mine.id] and total == 1
    page, total = await store.list_tasks(Listing(None, None, 10))
    assert [t.id for t in page] == [anonymous.id]


async def test_an_approvers_listing_shows_every_users_tasks_in_its_state(
    store: TaskStore, clock: Clock
) -> None:
    alices = await created(store, "alice")
    clock.now += 1
    bobs = await created(store, "bob", context="c2")
    working = pb.TASK_STATE_WORKING
    page, total = await store.list_tasks(Listing("carol", None, 10, working, every_owner=True))
    assert [t.id for t in page] == [bobs.id, alices.id] and total == 2
    # Still narrowed by context and state; without every_owner, carol's own (none).
    everyone_c2 = Listing("carol", "c2", 10, working, every_owner=True)
    assert [t.id for t in (await store.list_tasks(everyone_c2))[0]] == [bobs.id]
    done = Listing("carol", None, 10, pb.TASK_STATE_COMPLETED, every_owner=True)
    assert await store.list_tasks(done) == ([], 0)
    assert await store.list_tasks(Listing("carol", None, 10, working)) == ([], 0)


async def test_list_is_newest_first_and_counts_beyond_the_page(
    store: TaskStore, clock: Clock
) -> None:
    ids = []
    for _ in range(3):
        ids.append((await created(store, "alice")).id)
        clock.now += 1
    page, total = await store.list_tasks(Listing("alice", None, 2))
    assert [t.id for t in page] == ids[::-1][:2] and total == 3


async def test_terminal_states_stick(store: TaskStore) -> None:
    task = await created(store, "alice")
    done = await store.finish(task.id, completed("the answer"))
    assert done is not None and done.status.state == pb.TASK_STATE_COMPLETED

    after = await store.finish(task.id, failed("too late"))
    assert after is not None and after.status.state == pb.TASK_STATE_COMPLETED
    refused = await store.cancel(task.id, "alice")
    assert refused.canceled is False and refused.task is not None
    assert refused.task.status.state == pb.TASK_STATE_COMPLETED
    stored = await store.get(task.id, "alice")
    assert stored is not None and stored.artifacts[0].parts[0].text == "the answer"

    other = await created(store, "alice")
    cancel = await store.cancel(other.id, "alice")
    assert cancel.canceled and cancel.task is not None
    assert cancel.task.status.state == pb.TASK_STATE_CANCELED
    assert await store.cancel_requested([other.id, task.id]) == [other.id]
    late = await store.finish(other.id, completed("finished anyway"))
    assert late is not None and late.status.state == pb.TASK_STATE_CANCELED
    assert await store.finish("no-such-task", canceled) is None


async def test_a_lapsed_lease_fails_the_task_and_a_renewed_one_does_not(
    store: TaskStore, clock: Clock
) -> None:
    if store.shared or isinstance(store, SqliteTaskStore):
        # A store that outlives its process resumes instead (``test_task_resume``): its
        # lapsed tasks fail only once resumed too often, as if that bound were 0.
        store.max_resumes = 0  # type: ignore[attr-defined]
    orphan = await created(store, "alice", runner="pod-gone")
    alive = await created(store, "alice", runner="pod-a")
    done = await created(store, "alice", runner="pod-gone")
    await store.finish(done.id, completed("done"))

    clock.now += LEASE - 1
    await store.renew("pod-a", [alive.id, orphan.id])  # not pod-a's: not renewed
    assert await store.expire_leases() == 0
    clock.now += 2
    assert await store.expire_leases() == 1

    failed_task = await store.get(orphan.id, "alice")
    assert failed_task is not None and failed_task.status.state == pb.TASK_STATE_FAILED
    reason = LAPSED_LEASE if isinstance(store, MemoryTaskStore) else resume_limit(0)
    assert failed_task.status.message.parts[0].text == reason
    kept = await store.get(alive.id, "alice")
    assert kept is not None and kept.status.state == pb.TASK_STATE_WORKING
    assert (await store.get(done.id, "alice")).status.state == pb.TASK_STATE_COMPLETED  # type: ignore[union-attr]
    assert await store.expire_leases() == 0


async def test_a_released_lease_is_claimed_at_once_and_only_the_runners_own(
    store: TaskStore, clock: Clock
) -> None:
    mine = await created(store, "alice", runner="pod-a")
    theirs = await created(store, "alice", runner="pod-b")
    done = await created(store, "alice", runner="pod-a")
    await store.finish(done.id, completed("done"))

    released = await store.release("pod-a", [mine.id, theirs.id, done.id, "missing"])
    clock.now += 1  # a beat later, far inside the lease
    claims = await store.claim_lapsed("pod-c")
    if isinstance(store, MemoryTaskStore):
        # Nobody else could resume it: nothing released, the run fails it (``STOPPED``).
        assert released == 0 and claims == []
        return
    assert released == 1
    assert [(c.task.id, c.resumes) for c in claims] == [(mine.id, 1)]
    assert await store.release("pod-a", [mine.id]) == 0  # pod-c's now
    kept = await store.get(theirs.id, "alice")
    assert kept is not None and kept.status.state == pb.TASK_STATE_WORKING
    assert await store.claim_lapsed("pod-d") == []
    # A hand-over does not count as a resume: handed on and on, the task is still claimed
    # with the count it had (a crash's lapse counts: the resume bound is for those).
    for pod, after in (("pod-c", "pod-d"), ("pod-d", "pod-e"), ("pod-e", "pod-f")):
        assert await store.release(pod, [mine.id]) == 1
        clock.now += 1
        assert [(c.task.id, c.resumes) for c in await store.claim_lapsed(after)] == [(mine.id, 1)]


async def test_the_sweep_deletes_only_finished_tasks_past_the_retention(
    store: TaskStore, clock: Clock
) -> None:
    old = [await created(store, "alice") for _ in range(3)]
    for task in old:
        await store.finish(task.id, completed("done"))
    working = await created(store, "alice")
    clock.now += 100
    recent = await created(store, "alice")
    await store.finish(recent.id, failed("no"))
    await store.renew("pod-a", [working.id])

    assert await store.sweep(retention_seconds=50, limit=2) == 2
    assert await store.sweep(retention_seconds=50, limit=2) == 1
    assert await store.sweep(retention_seconds=50, limit=2) == 0
    page, _ = await store.list_tasks(Listing("alice", None, 10))
    assert {t.id for t in page} == {working.id, recent.id}


async def test_a_named_lease_has_one_holder_until_it_lapses(store: TaskStore, clock: Clock) -> None:
    assert await store.try_lease("autonomous:a", "pod-a", 10)
    assert not await store.try_lease("autonomous:a", "pod-b", 10)
    assert await store.try_lease("autonomous:other", "pod-b", 10)
    assert await store.try_lease("autonomous:a", "pod-a", 10)  # kept by its holder
    clock.now += 11
    assert await store.try_lease("autonomous:a", "pod-b", 10)
    assert not await store.try_lease("autonomous:a", "pod-a", 10)


async def test_sqlite_tasks_outlive_the_store(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "tasks.db"
    first = SqliteTaskStore(path, lease_seconds=LEASE, clock=clock)
    await first.start()
    done = await created(first, "alice")
    await first.finish(done.id, completed("kept"))
    running = await created(first, "alice")
    await first.close()

    second = SqliteTaskStore(path, lease_seconds=LEASE, clock=clock)
    await second.start()
    try:
        kept = await second.get(done.id, "alice")
        assert kept is not None and kept.status.state == pb.TASK_STATE_COMPLETED
        clock.now += LEASE + 1
        assert await second.expire_leases() == 0
        [claim] = await second.claim_lapsed("pod-a")
        assert claim.task.id == running.id and claim.checkpoint is None
    finally:
        await second.close()


async def test_postgres_replicas_create_the_schema_together_and_hear_cancels(
    pg_dsn: str, clock: Clock
) -> None:
    replicas = [PostgresTaskStore(pg_dsn, lease_seconds=LEASE, clock=clock) for _ in range(3)]
    await asyncio.gather(*(r.start() for r in replicas))
    heard: asyncio.Queue[str] = asyncio.Queue()
    listening = asyncio.create_task(replicas[0].listen_cancels(heard.put_nowait))
    try:
        task = await created(replicas[0], "alice")
        assert await replicas[1].get(task.id, "alice") == task
        # The listener may not be listening yet: ask until it hears one.
        deadline = asyncio.get_running_loop().time() + 20
        first = await replicas[2].cancel(task.id, "alice")
        assert first.canceled
        while True:
            try:
                assert await asyncio.wait_for(heard.get(), 0.5) == task.id
                break
            except TimeoutError:
                assert asyncio.get_running_loop().time() < deadline, "no cancel notification"
                other = await created(replicas[0], "alice")
                await replicas[2].cancel(other.id, "alice")
                task = other
        assert pg_dsn not in repr(replicas[0])
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)
        await asyncio.gather(*(r.close() for r in replicas))


async def test_a_postgres_release_wakes_the_other_replicas(pg_dsn: str, clock: Clock) -> None:
    replicas = [PostgresTaskStore(pg_dsn, lease_seconds=LEASE, clock=clock) for _ in range(2)]
    await asyncio.gather(*(r.start() for r in replicas))
    woken = asyncio.Event()
    listening = asyncio.create_task(replicas[1].listen_cancels(lambda _: None, woken.set))
    try:
        # The listener may not be listening yet: hand over until it hears one.
        deadline = asyncio.get_running_loop().time() + 20
        while not woken.is_set():
            task = await created(replicas[0], "alice", runner="pod-a")
            assert await replicas[0].release("pod-a", [task.id]) == 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), 0.5)
            assert asyncio.get_running_loop().time() < deadline, "no release notification"
        woken.clear()
        assert await replicas[0].release("pod-a", ["missing"]) == 0
        with pytest.raises(TimeoutError):  # nothing released: nobody woken
            await asyncio.wait_for(woken.wait(), 1.0)
    finally:
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)
        await asyncio.gather(*(r.close() for r in replicas))


async def test_a_store_that_cannot_be_reached_is_unavailable_without_the_dsn() -> None:
    from kaos_agent.a2a.tasks import TaskStoreUnavailable

    dsn = "postgresql://kaos:hunter2@127.0.0.1:9/none?connect_timeout=1"
    store = PostgresTaskStore(dsn, start_timeout=2)
    with pytest.raises(TaskStoreUnavailable) as info:
        await store.start()
    assert "hunter2" not in str(info.value) and "hunter2" not in repr(store)
    await store.close()


@pytest.mark.parametrize(
    ("store_env", "problem"),
    [
        ({"TASK_STORE_TYPE": "external"}, "TASK_STORE_TYPE=external needs TASK_STORE_DSN"),
        ({"TASK_STORE_TYPE": "local"}, "TASK_STORE_TYPE=local needs TASK_STORE_PATH"),
        (
            {"TASK_STORE_DSN": "postgresql://kaos:hunter2@db/kaos"},
            "TASK_STORE_DSN is set but TASK_STORE_TYPE=memory",
        ),
    ],
)
def test_a_contradictory_task_store_fails_at_start_without_the_dsn(
    store_env: dict[str, str], problem: str
) -> None:
    env = {"MODEL_API_URL": "http://127.0.0.1:9/v1", "MODEL_NAME": "m", **store_env}
    with pytest.raises(SettingsError) as info:
        AgentSettings.from_env(env)
    assert problem in str(info.value) and "hunter2" not in str(info.value)


PROBE = """
import json, sys
from kaos_agent.app import create_app
from kaos_agent.a2a.stores import build_task_store
from kaos_agent.settings import AgentSettings
settings = AgentSettings.from_env(json.loads(sys.argv[1]))
create_app(settings)
build_task_store(settings.task_store)
print(json.dumps("psycopg" in sys.modules))
"""


@pytest.mark.parametrize(
    ("store_env", "loaded"),
    [
        ({}, False),
        ({"TASK_STORE_TYPE": "local", "TASK_STORE_PATH": "/nonexistent/tasks.db"}, False),
        ({"TASK_STORE_TYPE": "external", "TASK_STORE_DSN": "postgresql://x@127.0.0.1:9/x"}, True),
    ],
)
def test_psycopg_is_loaded_only_for_the_external_store(
    store_env: dict[str, str], loaded: bool
) -> None:
    env = {"AGENT_NAME": "lean", "MODEL_API_URL": "http://127.0.0.1:9/v1", "MODEL_NAME": "m"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps({**env, **store_env})],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert json.loads(out.stdout) is loaded
