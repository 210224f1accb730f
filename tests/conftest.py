"""Test-wide configuration: fixture plugins live in ``tests/fixtures/``, one module per concern."""

import os

# Mem0 reads this once, when first imported, and otherwise reports usage to PostHog: a test
# that imports it before a fixture set the variable would have every later Memory in the
# process try to phone home (the services set it themselves).
os.environ.setdefault("MEM0_TELEMETRY", "False")

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
