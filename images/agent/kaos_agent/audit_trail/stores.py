"""The audit log the task store's settings call for (``TASK_STORE_TYPE``), not yet started
(``kaos_agent.records.stores``: beside the task store; psycopg only when configured)."""

from __future__ import annotations

from kaos_agent.audit.log import AuditLog, MemoryAuditLog
from kaos_agent.audit_trail.sqlite_log import SqliteAuditLog
from kaos_agent.records.stores import beside_tasks
from kaos_agent.settings import TaskStoreSettings


def build_audit_log(settings: TaskStoreSettings) -> AuditLog:
    return beside_tasks(settings, memory=MemoryAuditLog, local=SqliteAuditLog, external=_postgres)


def _postgres(dsn: str) -> AuditLog:
    from kaos_agent.audit_trail.pg_log import PostgresAuditLog

    return PostgresAuditLog(dsn)
