"""What the SQL task stores share: the schema, the statements and the row codec.

Both ``kaos_agent.a2a.sqlite_store`` and ``kaos_agent.a2a.pg_store`` keep one row per task:
its id, context, owner and state as columns (what ``list``, the lease check and the
retention sweep select on) and the task itself as the protobuf's serialized bytes (the
state column mirrors ``task.status.state``). A working task also carries its run's last
checkpoint (``kaos_agent.a2a.checkpoint``) and how often it was resumed: columns added to
tables of an earlier version at start (``added_columns``). Times are seconds since the epoch as each
replica's clock reads them; a lease is tens of seconds, far above the skew of synchronized
clocks. Statements are written with ``%s`` placeholders (psycopg's); SQLite's ``?`` is
substituted by ``qmark``.

Why not a2a-sdk's ``DatabaseTaskStore``: it needs SQLAlchemy and an async driver
(asyncpg or aiosqlite), none of which the agent image carries, and it has no leases,
cancel requests across replicas nor retention; the statements below are that much, on the
drivers the project already uses (psycopg, the standard library's sqlite3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a.types import a2a_pb2 as pb

from kaos_agent.a2a.tasks import TERMINAL_STATES, Claim, Listing, Transition, visible

TASKS = "kaos_agent_tasks"
LEASES = "kaos_agent_leases"


def added_columns(blob: str) -> list[tuple[str, str]]:
    """Columns added after the first version of the table: (name, declaration), in order."""
    return [
        ("checkpoint", f"{blob}"),
        ("resumes", "INTEGER NOT NULL DEFAULT 0"),
        # A paused task's deadline for a decision (``kaos_agent.approvals``).
        ("decide_by", "DOUBLE PRECISION"),
    ]


def schema(blob: str) -> list[str]:
    """``CREATE ... IF NOT EXISTS`` of the tables and indexes; ``blob``: the bytes type."""
    return [
        f"""CREATE TABLE IF NOT EXISTS {TASKS} (
            id TEXT PRIMARY KEY,
            context_id TEXT NOT NULL,
            principal TEXT,
            state TEXT NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            runner TEXT,
            lease_until DOUBLE PRECISION,
            cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
            task {blob} NOT NULL
        )""",
        f"CREATE INDEX IF NOT EXISTS {TASKS}_principal ON {TASKS} (principal, created_at)",
        f"CREATE INDEX IF NOT EXISTS {TASKS}_context ON {TASKS} (context_id, created_at)",
        f"CREATE INDEX IF NOT EXISTS {TASKS}_retention ON {TASKS} (state, updated_at)",
        f"CREATE INDEX IF NOT EXISTS {TASKS}_lease ON {TASKS} (lease_until)"
        " WHERE lease_until IS NOT NULL",
        f"""CREATE TABLE IF NOT EXISTS {LEASES} (
            name TEXT PRIMARY KEY,
            holder TEXT NOT NULL,
            until DOUBLE PRECISION NOT NULL
        )""",
    ]


_TERMINAL = ", ".join(f"'{pb.TaskState.Name(s)}'" for s in sorted(TERMINAL_STATES))
_UNFINISHED = ", ".join(
    f"'{pb.TaskState.Name(s)}'" for s in (pb.TASK_STATE_SUBMITTED, pb.TASK_STATE_WORKING)
)
# The Agent's load (kaos_agent.load): its tasks still to finish, those whose replica died
# and that wait to be claimed included (the retention index covers the state).
COUNT_WORKING = f"SELECT count(*) FROM {TASKS} WHERE state IN ({_UNFINISHED})"

INSERT = (
    f"INSERT INTO {TASKS} (id, context_id, principal, state, created_at, updated_at, runner,"
    " lease_until, cancel_requested, task) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, FALSE, %s)"
)
SELECT_ONE = f"SELECT principal, task FROM {TASKS} WHERE id = %s"
# A transition written back: the lease ends with the task's run; a cancel marks the row.
UPDATE = (
    f"UPDATE {TASKS} SET state = %s, updated_at = %s, task = %s, lease_until = NULL,"
    " cancel_requested = (cancel_requested OR %s) WHERE id = %s"
)
VISIBLE = "(principal IS NULL OR principal = %s)"
ANONYMOUS = "principal IS NULL"
# Lapsed leases of tasks resumed as often as allowed: failed, not claimed.
EXPIRED = (
    f"SELECT id FROM {TASKS} WHERE lease_until IS NOT NULL AND lease_until < %s"
    " AND resumes >= %s ORDER BY lease_until LIMIT %s"
)
# A hand-over: the lease of a working task its runner stopped ends now (claimable at once).
# A hand-over (a graceful stop) does not count against the resume bound, which is for runs
# that keep killing their pods: the claim that follows counts it back.
RELEASE = (
    f"UPDATE {TASKS} SET lease_until = %s, updated_at = %s,"
    " resumes = CASE WHEN resumes > 0 THEN resumes - 1 ELSE 0 END"
    " WHERE id = %s AND runner = %s AND lease_until IS NOT NULL"
)
# A step of a run, kept only while its runner still holds the task.
CHECKPOINT = (
    f"UPDATE {TASKS} SET checkpoint = %s, updated_at = %s"
    " WHERE id = %s AND runner = %s AND lease_until IS NOT NULL"
)


_PAUSED = f"'{pb.TaskState.Name(pb.TASK_STATE_INPUT_REQUIRED)}'"
# A run that waits for a decision (``TaskStore.pause``): its runner still holds the task;
# the paused task keeps its checkpoint and holds no lease (nothing runs, nothing claims it).
SELECT_HELD = (
    f"SELECT principal, task FROM {TASKS} WHERE id = %s AND runner = %s AND lease_until IS NOT NULL"
)
PAUSE = (
    f"UPDATE {TASKS} SET state = %s, updated_at = %s, task = %s, checkpoint = %s,"
    " decide_by = %s, lease_until = NULL WHERE id = %s"
)
# A decision taken (``TaskStore.take_paused``): the paused task, its checkpoint...
SELECT_PAUSED = (
    f"SELECT principal, task, checkpoint, resumes FROM {TASKS} WHERE id = %s AND state = {_PAUSED}"
)
# ...and its run resumed by ``runner``, under a new lease.
RESUME = (
    f"UPDATE {TASKS} SET state = %s, updated_at = %s, task = %s, runner = %s,"
    " lease_until = %s, decide_by = NULL WHERE id = %s"
)
# Paused tasks whose decision is due (the timeout's).
DUE = (
    f"SELECT id FROM {TASKS} WHERE state = {_PAUSED} AND decide_by < %s ORDER BY decide_by LIMIT %s"
)


def paused_params(
    row: Sequence[Any] | None,
    task_id: str,
    change: Transition,
    *,
    now: float,
    data: bytes,
    decide_by: float,
) -> tuple[object, ...] | None:
    """``PAUSE``'s parameters for a ``SELECT_HELD`` row (None: not held, or no change)."""
    if row is None:
        return None
    task = decode(row[1])
    if not change(task):
        return None
    return (state_name(task), now, encode(task), data, decide_by, task_id)


def resumed(
    row: Sequence[Any] | None,
    task_id: str,
    change: Transition,
    *,
    runner: str,
    now: float,
    lease_seconds: float,
) -> tuple[Claim | None, tuple[object, ...] | None]:
    """The claim of a ``SELECT_PAUSED`` row after ``change``, and ``RESUME``'s parameters."""
    if row is None:
        return None, None
    task = decode(row[1])
    if not change(task):
        return None, None
    checkpoint = bytes(row[2]) if row[2] is not None else None
    claim = Claim(task=task, principal=row[0], checkpoint=checkpoint, resumes=int(row[3]))
    return claim, (state_name(task), now, encode(task), runner, now + lease_seconds, task_id)


def claim_statement(lock: str = "") -> str:
    """Take over tasks whose lease lapsed and that may be resumed again (``lock``: how the
    candidates are locked, PostgreSQL's ``FOR UPDATE SKIP LOCKED``). Parameters: runner,
    new lease end, now, now, resume bound, limit, now."""
    return (
        f"UPDATE {TASKS} SET runner = %s, lease_until = %s, resumes = resumes + 1,"
        f" updated_at = %s WHERE id IN (SELECT id FROM {TASKS} WHERE lease_until IS NOT NULL"
        f" AND lease_until < %s AND resumes < %s ORDER BY lease_until LIMIT %s {lock})"
        " AND lease_until IS NOT NULL AND lease_until < %s"
        " RETURNING id, principal, task, checkpoint, resumes"
    )


def claim_params(
    runner: str, *, now: float, lease_seconds: float, max_resumes: int, limit: int
) -> tuple[object, ...]:
    return (runner, now + lease_seconds, now, now, max_resumes, limit, now)


def claimed(rows: Sequence[Sequence[Any]]) -> list[Claim]:
    """The claims of ``claim_statement``'s rows."""
    return [
        Claim(
            task=decode(r[2]),
            principal=r[1],
            checkpoint=bytes(r[3]) if r[3] is not None else None,
            resumes=int(r[4]),
        )
        for r in rows
    ]


SWEEP = (
    f"DELETE FROM {TASKS} WHERE id IN (SELECT id FROM {TASKS} WHERE state IN ({_TERMINAL})"
    " AND updated_at < %s ORDER BY updated_at LIMIT %s)"
)
# Taken when free, lapsed or already ours; no row back: another replica holds it.
TAKE_LEASE = (
    f"INSERT INTO {LEASES} (name, holder, until) VALUES (%s, %s, %s)"
    " ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until"
    f" WHERE {LEASES}.holder = excluded.holder OR {LEASES}.until < %s RETURNING holder"
)


def list_query(listing: Listing) -> tuple[str, list[object]]:
    """The WHERE clause of ``listing`` (without the keyword) and its parameters."""
    where: list[str] = ["TRUE"]
    params: list[object] = []
    if not listing.every_owner:
        principal = listing.principal
        where = [VISIBLE] if principal is not None else [ANONYMOUS]
        params = [principal] if principal is not None else []
    if listing.context_id:
        where.append("context_id = %s")
        params.append(listing.context_id)
    if listing.state:
        where.append("state = %s")
        params.append(pb.TaskState.Name(listing.state))
    return " AND ".join(where), params


def list_statements(where: str) -> tuple[str, str]:
    """The page (newest first, ``LIMIT %s``) and the count of a list."""
    page = f"SELECT task FROM {TASKS} WHERE {where} ORDER BY created_at DESC, id LIMIT %s"
    return page, f"SELECT count(*) FROM {TASKS} WHERE {where}"


def insert_params(
    task: pb.Task, *, principal: str | None, runner: str, now: float, lease_seconds: float
) -> tuple[object, ...]:
    """``INSERT``'s parameters: a new task, its lease held by ``runner``."""
    state = state_name(task)
    return (
        task.id,
        task.context_id,
        principal,
        state,
        now,
        now,
        runner,
        now + lease_seconds,
        encode(task),
    )


def transition(
    row: Sequence[Any] | None,
    task_id: str,
    change: Transition,
    *,
    now: float,
    principal: str | None = None,
    check_owner: bool = False,
    cancel: bool = False,
) -> tuple[pb.Task | None, tuple[object, ...] | None]:
    """The task of a ``SELECT_ONE`` row after ``change``, and ``UPDATE``'s parameters (None:
    nothing to write). No task when the row is missing or, with ``check_owner``, another
    principal's."""
    if row is None or (check_owner and not visible(row[0], principal)):
        return None, None
    task = decode(row[1])
    if not change(task):
        return task, None
    return task, (state_name(task), now, encode(task), cancel, task_id)


def state_name(task: pb.Task) -> str:
    name: str = pb.TaskState.Name(task.status.state)
    return name


def encode(task: pb.Task) -> bytes:
    data: bytes = task.SerializeToString()
    return data


def decode(data: bytes | memoryview) -> pb.Task:
    task = pb.Task()
    task.ParseFromString(bytes(data))
    return task


def qmark(statement: str) -> str:
    """A statement with SQLite's placeholders."""
    return statement.replace("%s", "?")
