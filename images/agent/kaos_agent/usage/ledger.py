"""The usage ledger: the tokens each agent's runs used, per (agent, principal, UTC day).

One row per (agent, principal, day) holds the input, output and total tokens the model
reported and the number of runs; a finished run adds to its row in one statement (an
upsert), so replicas sharing the ledger count together without losing an addition. The
ledger lives beside the A2A task store (``TASK_STORE_TYPE``): ``memory`` keeps it in the
process (``MemoryLedger``, bounded), ``local`` in a table of the SQLite file
(``kaos_agent.usage.sqlite_ledger``), ``external`` in a table of the PostgreSQL database
(``kaos_agent.usage.pg_ledger``), each on a connection of its own (built by
``kaos_agent.usage.stores``). Days older than the retention are deleted by a sweep.

A store that fails answers ``TaskStoreUnavailable`` (503).
"""

from __future__ import annotations

import abc
import datetime as dt
from collections import OrderedDict
from dataclasses import dataclass

TABLE = "kaos_agent_usage"
# Callers without a principal share one row (and one budget) a day.
ANONYMOUS = "anonymous"
# Rows the ledger in memory keeps; the oldest days go first past it.
MEMORY_ROWS_MAX = 100_000
# Rows one query answers at most.
QUERY_ROWS_MAX = 10_000

SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} ("
    " agent TEXT NOT NULL,"
    " principal TEXT NOT NULL,"
    " day TEXT NOT NULL,"
    " input_tokens BIGINT NOT NULL DEFAULT 0,"
    " output_tokens BIGINT NOT NULL DEFAULT 0,"
    " runs BIGINT NOT NULL DEFAULT 0,"
    " PRIMARY KEY (agent, day, principal))",
)
# Parameters in psycopg's style; SQLite's ``?`` by ``qmark``.
ADD = (
    f"INSERT INTO {TABLE} AS u (agent, principal, day, input_tokens, output_tokens, runs)"
    " VALUES (%s, %s, %s, %s, %s, 1) ON CONFLICT (agent, day, principal) DO UPDATE SET"
    " input_tokens = u.input_tokens + excluded.input_tokens,"
    " output_tokens = u.output_tokens + excluded.output_tokens,"
    " runs = u.runs + 1"
)
SPENT = (
    "SELECT coalesce(sum(input_tokens + output_tokens), 0),"
    " coalesce(sum(CASE WHEN principal = %s THEN input_tokens + output_tokens ELSE 0 END), 0)"
    f" FROM {TABLE} WHERE agent = %s AND day = %s"
)
QUERY = (
    f"SELECT agent, principal, day, input_tokens, output_tokens, runs FROM {TABLE}"
    " WHERE agent = %s AND day >= %s AND day <= %s"
    " AND (CAST(%s AS TEXT) IS NULL OR principal = %s)"
    f" ORDER BY day, principal LIMIT {QUERY_ROWS_MAX}"
)
SWEEP = f"DELETE FROM {TABLE} WHERE day < %s"


def qmark(statement: str) -> str:
    return statement.replace("%s", "?")


def utc_day(at: float) -> str:
    """The UTC day of epoch seconds ``at``, as ``YYYY-MM-DD``."""
    return dt.datetime.fromtimestamp(at, dt.UTC).date().isoformat()


def seconds_to_next_day(at: float) -> int:
    """Whole seconds from ``at`` to the next UTC midnight (at least 1)."""
    now = dt.datetime.fromtimestamp(at, dt.UTC)
    midnight = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), dt.UTC)
    return max(1, int(-(-(midnight - now).total_seconds() // 1)))


@dataclass(frozen=True)
class UsageRow:
    """One agent's tokens for one principal on one UTC day."""

    agent: str
    user: str
    day: str
    input_tokens: int
    output_tokens: int
    runs: int

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def wire(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "user": self.user,
            "day": self.day,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.total_tokens,
            "runs": self.runs,
        }


@dataclass(frozen=True)
class Spent:
    """Tokens used on one day: by the whole agent, and by one principal of it."""

    agent: int = 0
    principal: int = 0


class Ledger(abc.ABC):
    """Tokens per (agent, principal, UTC day), shared as the task store is."""

    async def start(self) -> None:  # noqa: B027 - a hook: the ledger in memory opens nothing
        pass

    async def close(self) -> None:  # noqa: B027 - a hook, as ``start``
        pass

    @abc.abstractmethod
    async def add(
        self, agent: str, principal: str, day: str, input_tokens: int, output_tokens: int
    ) -> None:
        """Add one run's tokens to its day."""

    @abc.abstractmethod
    async def spent(self, agent: str, principal: str, day: str) -> Spent:
        """The tokens ``agent`` and its ``principal`` used on ``day``."""

    @abc.abstractmethod
    async def query(
        self, agent: str, since: str, until: str, principal: str | None = None
    ) -> list[UsageRow]:
        """The rows of ``agent`` from day ``since`` to ``until`` (both included), of one
        principal or all, by day then principal; at most ``QUERY_ROWS_MAX``."""

    @abc.abstractmethod
    async def sweep(self, before: str) -> None:
        """Delete the days before ``before``."""


class MemoryLedger(Ledger):
    """One replica's ledger (``TASK_STORE_TYPE=memory``: its tasks are its own too)."""

    def __init__(self, *, max_rows: int = MEMORY_ROWS_MAX) -> None:
        self.max_rows = max_rows
        # (agent, day, principal) -> [input, output, runs]; inserted in time order.
        self._rows: OrderedDict[tuple[str, str, str], list[int]] = OrderedDict()

    async def add(
        self, agent: str, principal: str, day: str, input_tokens: int, output_tokens: int
    ) -> None:
        row = self._rows.setdefault((agent, day, principal), [0, 0, 0])
        row[0] += input_tokens
        row[1] += output_tokens
        row[2] += 1
        while len(self._rows) > self.max_rows:
            self._rows.popitem(last=False)

    async def spent(self, agent: str, principal: str, day: str) -> Spent:
        total = mine = 0
        for (a, d, p), row in self._rows.items():
            if a == agent and d == day:
                total += row[0] + row[1]
                if p == principal:
                    mine += row[0] + row[1]
        return Spent(agent=total, principal=mine)

    async def query(
        self, agent: str, since: str, until: str, principal: str | None = None
    ) -> list[UsageRow]:
        rows = [
            UsageRow(a, p, d, *row)
            for (a, d, p), row in self._rows.items()
            if a == agent and since <= d <= until and principal in (None, p)
        ]
        rows.sort(key=lambda r: (r.day, r.user))
        return rows[:QUERY_ROWS_MAX]

    async def sweep(self, before: str) -> None:
        for key in [k for k in self._rows if k[1] < before]:
            del self._rows[key]
