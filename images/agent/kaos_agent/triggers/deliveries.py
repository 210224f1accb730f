"""The deliveries each trigger received lately: the replay check and the rate limit.

A delivery is admitted once: its id and its signature's digest are recorded for
``REPLAY_SECONDS``, and a delivery with a recorded id or digest is a replay. A trigger
admits at most ``max_per_minute`` deliveries in any ``RATE_WINDOW_SECONDS``; one more is
refused with the seconds until the oldest of them leaves the window. Both hold across the
replicas that share the task store, because the log lives beside it (``TASK_STORE_TYPE``):
``memory`` keeps it in the process (``MemoryDeliveryLog``), ``local`` in a table of the
SQLite file (``kaos_agent.triggers.sqlite_deliveries``), ``external`` in a table of the
PostgreSQL database (``kaos_agent.triggers.pg_deliveries``), each on a connection of its
own (built by ``kaos_agent.triggers.stores``). An admission is one transaction holding
the trigger's lock (SQLite's write lock, a PostgreSQL advisory lock per trigger), so
replicas counting together cannot both take the last place; the row's primary key
(trigger, id) and its unique (trigger, digest) make the insert itself the replay check
(``ON CONFLICT DO NOTHING``). Records older than the replay window are deleted as the
trigger is used.

A store that fails answers ``TaskStoreUnavailable`` (503): nothing is started.
"""

from __future__ import annotations

import abc
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

REPLAY_SECONDS = 600.0
RATE_WINDOW_SECONDS = 60.0
TABLE = "kaos_agent_trigger_deliveries"

SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    " trigger_name TEXT NOT NULL,"
    " delivery TEXT NOT NULL,"
    " digest TEXT NOT NULL,"
    " seen_at DOUBLE PRECISION NOT NULL,"
    " PRIMARY KEY (trigger_name, delivery),"
    " UNIQUE (trigger_name, digest))",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_seen ON {TABLE} (trigger_name, seen_at)",
)
# Parameters in psycopg's style; SQLite's ``?`` by ``qmark``.
FORGET_EXPIRED = f"DELETE FROM {TABLE} WHERE trigger_name = %s AND seen_at < %s"
SEEN = f"SELECT 1 FROM {TABLE} WHERE trigger_name = %s AND (delivery = %s OR digest = %s)"
RECENT = f"SELECT count(*), min(seen_at) FROM {TABLE} WHERE trigger_name = %s AND seen_at > %s"
INSERT = (
    f"INSERT INTO {TABLE} (trigger_name, delivery, digest, seen_at) VALUES (%s, %s, %s, %s)"
    " ON CONFLICT DO NOTHING"
)
FORGET = f"DELETE FROM {TABLE} WHERE trigger_name = %s AND delivery = %s"


def qmark(statement: str) -> str:
    return statement.replace("%s", "?")


@dataclass(frozen=True)
class Delivery:
    trigger: str
    id: str
    digest: str


@dataclass(frozen=True)
class Admission:
    """The verdict on one delivery: admitted, a replay, or over the rate (retry after)."""

    admitted: bool = False
    replayed: bool = False
    retry_after: int = 0


def over_rate(count: int, oldest: float | None, limit: int, now: float) -> Admission | None:
    """The refusal when ``count`` deliveries since the window's start (the oldest at
    ``oldest``) leave no place; ``None`` when one more fits."""
    if count < limit:
        return None
    start = oldest if oldest is not None else now
    return Admission(retry_after=max(1, math.ceil(start + RATE_WINDOW_SECONDS - now)))


class DeliveryLog(abc.ABC):
    """The trigger deliveries of the last ``REPLAY_SECONDS``, shared as the task store is."""

    async def start(self) -> None:  # noqa: B027 - a hook: the log in memory opens nothing
        pass

    async def close(self) -> None:  # noqa: B027 - a hook, as ``start``
        pass

    @abc.abstractmethod
    async def admit(self, delivery: Delivery, *, max_per_minute: int) -> Admission:
        """Record ``delivery`` unless it is a replay or its trigger is at its rate."""

    @abc.abstractmethod
    async def forget(self, delivery: Delivery) -> None:
        """Drop an admitted delivery whose task could not start (its sender may retry)."""


class MemoryDeliveryLog(DeliveryLog):
    """One replica's log (``TASK_STORE_TYPE=memory``: its tasks are its own too)."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        # Trigger -> delivery id -> (digest, seen at), oldest first.
        self._seen: dict[str, dict[str, tuple[str, float]]] = {}

    async def admit(self, delivery: Delivery, *, max_per_minute: int) -> Admission:
        # No await in here: one admission at a time on the event loop.
        now = self.clock()
        seen = self._seen.setdefault(delivery.trigger, {})
        for key in [k for k, (_, at) in seen.items() if at < now - REPLAY_SECONDS]:
            del seen[key]
        if delivery.id in seen or any(d == delivery.digest for d, _ in seen.values()):
            return Admission(replayed=True)
        recent = [at for _, at in seen.values() if at > now - RATE_WINDOW_SECONDS]
        refusal = over_rate(len(recent), min(recent, default=None), max_per_minute, now)
        if refusal is not None:
            return refusal
        seen[delivery.id] = (delivery.digest, now)
        return Admission(admitted=True)

    async def forget(self, delivery: Delivery) -> None:
        self._seen.get(delivery.trigger, {}).pop(delivery.id, None)
