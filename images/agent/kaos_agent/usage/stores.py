"""The usage ledger the task store's settings call for (``TASK_STORE_TYPE``), not yet
started (``kaos_agent.records.stores``: beside the task store; psycopg only when
configured)."""

from __future__ import annotations

from kaos_agent.records.stores import beside_tasks
from kaos_agent.settings import TaskStoreSettings
from kaos_agent.usage.ledger import Ledger, MemoryLedger
from kaos_agent.usage.sqlite_ledger import SqliteLedger


def build_ledger(settings: TaskStoreSettings) -> Ledger:
    return beside_tasks(settings, memory=MemoryLedger, local=SqliteLedger, external=_postgres)


def _postgres(dsn: str) -> Ledger:
    from kaos_agent.usage.pg_ledger import PostgresLedger

    return PostgresLedger(dsn)
