"""What the memory benchmarks share: percentiles, the PostgreSQL check and the development
model server they point the services at (imported by the scripts beside it)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.postgres import admin_dsn_from_env, server_error
from tests.support.procs import ServiceProcess, console_script, free_port, start_service


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def require_postgres(why: str) -> str:
    """The admin DSN of the project's PostgreSQL; exits naming ``why`` when it does not answer."""
    admin = admin_dsn_from_env()
    error = server_error(admin)
    if error is not None:
        sys.exit(f"{why} needs PostgreSQL with pgvector ({admin}): {error}; run: make services")
    return admin


@contextmanager
def devmodel(dims: int) -> Iterator[ServiceProcess]:
    """``kaos-devmodel`` on a free loopback port with ``dims``-dimensional embeddings."""
    log_dir = Path(tempfile.mkdtemp(prefix="kaos-bench-devmodel-"))
    port = free_port()
    proc = start_service(
        "devmodel",
        [
            console_script("kaos-devmodel"),
            "--port",
            str(port),
            "--embedding-dims",
            str(dims),
            "--log-level",
            "WARNING",
        ],
        port=port,
        log_dir=log_dir,
    )
    try:
        yield proc
    finally:
        proc.stop(timeout=10)
        shutil.rmtree(log_dir, ignore_errors=True)
