"""The delivery log the task store's settings call for (``TASK_STORE_TYPE``), not yet
started (``kaos_agent.records.stores``: beside the task store; psycopg only when
configured)."""

from __future__ import annotations

import time
from collections.abc import Callable

from kaos_agent.records.stores import beside_tasks
from kaos_agent.settings import TaskStoreSettings
from kaos_agent.triggers.deliveries import DeliveryLog, MemoryDeliveryLog
from kaos_agent.triggers.sqlite_deliveries import SqliteDeliveryLog


def build_delivery_log(
    settings: TaskStoreSettings, *, clock: Callable[[], float] = time.time
) -> DeliveryLog:
    def postgres(dsn: str) -> DeliveryLog:
        from kaos_agent.triggers.pg_deliveries import PostgresDeliveryLog

        return PostgresDeliveryLog(dsn, clock=clock)

    return beside_tasks(
        settings,
        memory=lambda: MemoryDeliveryLog(clock=clock),
        local=lambda path: SqliteDeliveryLog(path, clock=clock),
        external=postgres,
    )
