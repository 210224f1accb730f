"""``kaos-memory``: run the memory service until SIGTERM.

The command line is read before anything else is imported: ``--help`` (and a wrong
argument) answers from the standard library alone, without loading the service, Mem0 or
a store, and without opening a socket.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

log = logging.getLogger("kaos_memory")

PROG = "kaos-memory"
DESCRIPTION = """\
Run the KAOS memory service: a short-term window, a per-session digest and long-term
facts (Mem0) behind the memory HTTP API, until SIGTERM. In a cluster the operator runs it
for each MemoryStore."""
EPILOG = """\
Configured by environment variables only, e.g.:
  KAOS_MEMORY_STORAGE            local (SQLite + Chroma in the data dir) or external
                                 (PostgreSQL + pgvector)
  KAOS_MEMORY_DATA_DIR           local mode: the one volume of the store
  KAOS_MEMORY_DSN                external mode: the PostgreSQL connection string
  KAOS_MEMORY_MODEL_BASE_URL     OpenAI-compatible endpoint of the models
  KAOS_MEMORY_PORT               listen port
Every variable, with its default, is in the memory settings reference
(images/memory/SETTINGS.md). A wrong value exits 2 naming the variable."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    parse_args(argv)
    serve()


def serve() -> None:
    # The service is imported only now that the command line asked for it (see above).
    from kaos_core.http import run_service
    from kaos_core.logging import configure_logging
    from kaos_core.settings import SettingsError, exit_on_settings_error
    from kaos_core.telemetry import setup_telemetry

    from kaos_memory.app import create_app
    from kaos_memory.datadir import DataDirInUse
    from kaos_memory.settings import load_memory_settings

    try:
        settings = load_memory_settings()
        _check_data_dir(settings.backend.data_dir, type(settings).env_name("data_dir"))
        telemetry = setup_telemetry(PROG, settings.telemetry)
    except SettingsError as exc:
        exit_on_settings_error(exc)
    http = settings.http
    configure_logging(PROG, http.log_level)
    log.info(
        "starting",
        extra={
            "storage": settings.backend.mode,
            "collection": settings.backend.collection,
            "data_dir": str(settings.backend.data_dir),
        },
    )
    try:
        run_service(create_app(settings), http.host, http.port)
    except DataDirInUse as exc:
        log.error("cannot start", extra={"error": str(exc)})
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(3) from None
    finally:
        if telemetry is not None:
            telemetry.shutdown()  # flush the spans still queued
    _exit_despite_stuck_threads(grace=5.0)


def _check_data_dir(data_dir: Path, variable: str) -> None:
    """The data directory exists (made if need be) and is writable, before anything starts:
    both modes keep Mem0's files there, local mode the whole store. Raises the settings
    error that names the variable and what to do."""
    from kaos_core.settings import SettingsError

    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        problem = None if os.access(data_dir, os.W_OK) else "not writable"
    except OSError as exc:
        problem = f"cannot be created ({exc.strerror or type(exc).__name__})"
    if problem is not None:
        raise SettingsError(
            f"{variable}={data_dir}: {problem}; point it at a writable directory "
            "(in a cluster the operator mounts the store's volume there)"
        )


def _exit_despite_stuck_threads(grace: float) -> None:
    """Exit even if a Mem0 call is still stuck in a worker thread (a hung model).

    The executor has drained within its deadline and the pools were shut down; their
    idle threads finish within moments. A thread still busy after ``grace`` seconds
    would keep the interpreter alive past the pod's termination grace period.
    """
    deadline = time.monotonic() + grace
    for thread in threading.enumerate():
        if thread is threading.main_thread() or thread.daemon:
            continue
        thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threading.enumerate() if t.is_alive() and not t.daemon]
    stuck = [name for name in stuck if name != threading.main_thread().name]
    if stuck:
        log.warning("exiting with busy worker threads", extra={"threads": stuck})
        logging.shutdown()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
