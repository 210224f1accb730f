"""The delivery log the task store's settings call for (``TASK_STORE_TYPE``), not yet
started: beside the task store, so it is shared exactly as far as the tasks are.

The PostgreSQL log is imported here, only when configured: psycopg and its pool stay out
of an agent on another store, as for the task store (``kaos_agent.a2a.stores``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kaos_agent.settings import TaskStoreSettings
from kaos_agent.triggers.deliveries import DeliveryLog, MemoryDeliveryLog
from kaos_agent.triggers.sqlite_deliveries import SqliteDeliveryLog


def build_delivery_log(
    settings: TaskStoreSettings, *, clock: Callable[[], float] = time.time
) -> DeliveryLog:
    if settings.type == "external":
        from kaos_agent.triggers.pg_deliveries import PostgresDeliveryLog

        assert settings.dsn is not None  # checked by the settings
        return PostgresDeliveryLog(settings.dsn.get_secret_value(), clock=clock)
    if settings.type == "local":
        assert settings.path is not None  # checked by the settings
        return SqliteDeliveryLog(settings.path, clock=clock)
    return MemoryDeliveryLog(clock=clock)
