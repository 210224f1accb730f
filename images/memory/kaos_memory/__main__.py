"""``kaos-memory``: run the memory service until SIGTERM."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time

from kaos_core.http import run_service
from kaos_core.logging import configure_logging
from kaos_core.settings import SettingsError, exit_on_settings_error
from kaos_core.telemetry import setup_telemetry

from kaos_memory.app import create_app
from kaos_memory.datadir import DataDirInUse
from kaos_memory.settings import load_memory_settings

log = logging.getLogger("kaos_memory")


def main() -> None:
    try:
        settings = load_memory_settings()
        telemetry = setup_telemetry("kaos-memory", settings.telemetry)
    except SettingsError as exc:
        exit_on_settings_error(exc)
    http = settings.http
    configure_logging("kaos-memory", http.log_level)
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
        print(f"kaos-memory: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(3) from None
    finally:
        if telemetry is not None:
            telemetry.shutdown()  # flush the spans still queued
    _exit_despite_stuck_threads(grace=5.0)


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
