"""The task store the settings name (``TASK_STORE_TYPE``), not yet started.

The PostgreSQL store is imported here, only when configured: psycopg and its pool stay
out of an agent on another store (its idle memory is a tracked figure).
"""

from __future__ import annotations

from kaos_agent.a2a.sqlite_store import SqliteTaskStore
from kaos_agent.a2a.tasks import MemoryTaskStore, TaskStore
from kaos_agent.settings import TaskStoreSettings


def build_task_store(settings: TaskStoreSettings) -> TaskStore:
    if settings.type == "external":
        from kaos_agent.a2a.pg_store import PostgresTaskStore

        assert settings.dsn is not None  # checked by the settings
        return PostgresTaskStore(
            settings.dsn.get_secret_value(), lease_seconds=settings.lease_seconds
        )
    if settings.type == "local":
        assert settings.path is not None  # checked by the settings
        return SqliteTaskStore(settings.path, lease_seconds=settings.lease_seconds)
    return MemoryTaskStore(lease_seconds=settings.lease_seconds)
