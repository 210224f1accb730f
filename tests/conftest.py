"""Test-wide configuration: fixture plugins live in ``tests/fixtures/``, one module per concern."""

pytest_plugins: list[str] = [
    "tests.fixtures.postgres",
    "tests.fixtures.devmodel",
]
