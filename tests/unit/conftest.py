"""``tests/unit`` runs in-process: a unit test that asks for a service process, PostgreSQL,
a cluster or a helm binary is in the wrong folder (``tests/integration`` or ``tests/e2e``),
and collection says so instead of letting ``make unit`` quietly start services."""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT = Path(__file__).parent
OUT_OF_PROCESS = {
    "devmodel",
    "devmodel_server",
    "private_devmodel_server",
    "memory_factory",
    "memory_service",
    "agent_factory",
    "module_agent_factory",
    "mcp_server_factory",
    "recording_memory",
    "pg_dsn",
    "pg_admin_dsn",
    "pg_bare_dsn",
    "pg_template_db",
    "pg_make_database",
    "private_postgres",
    "k8s_cluster",
    "k8s_namespace",
    "k8s_api",
    "kube",
    "kaos_operator",
    "operator_factory",
    "helm",
    "helm_binary",
    "jaeger",
    "oidc_provider",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    misplaced = [
        f"{item.nodeid}: {', '.join(sorted(set(item.fixturenames) & OUT_OF_PROCESS))}"
        for item in items
        if item.path.is_relative_to(UNIT) and set(item.fixturenames) & OUT_OF_PROCESS
    ]
    if misplaced:
        raise pytest.UsageError(
            "unit tests run in-process; move these to tests/integration:\n" + "\n".join(misplaced)
        )
