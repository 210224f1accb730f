"""Test-wide configuration: fixture plugins live in ``tests/fixtures/``, one module per concern."""

pytest_plugins: list[str] = [
    # "tests.fixtures.<name>" — one line per fixture module.
    "tests.fixtures.postgres",
    "tests.fixtures.cluster",
    "tests.fixtures.devmodel",
    "tests.fixtures.memory",
    "tests.fixtures.helm",
    "tests.fixtures.agent",
    "tests.fixtures.operator",
    "tests.fixtures.gateway",
    "tests.fixtures.leaks",
    "tests.fixtures.jaeger",
    "tests.fixtures.oidc",
    "tests.fixtures.kms",
    "tests.fixtures.service_logs",
]
