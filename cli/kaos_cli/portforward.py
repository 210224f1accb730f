"""Reach an in-cluster Service from the administrator's machine, for one command.

``kubectl port-forward`` runs for the duration of a ``with`` block on a free loopback
port; the block gets the local base URL. The forward is ready when kubectl announces
"Forwarding from"; if kubectl exits first (no such Service, no ready pod), its error
becomes a ``CliError``.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from kaos_cli.tools import CliError, first_line

READY_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def service_target(endpoint: str | None, name: str, default_port: int) -> tuple[str, int]:
    """The Service name and port behind a resource's ``status.endpoint``
    (``http://<svc>.<ns>.svc...:<port>``), else ``name`` and ``default_port``."""
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.hostname:
            return parts.hostname.split(".", 1)[0], parts.port or default_port
    return name, default_port


@contextmanager
def port_forward(
    kubectl: str,
    namespace: str | None,
    service: str,
    remote_port: int,
    *,
    context: str | None = None,
) -> Iterator[str]:
    """Forward a free local port to ``svc/<service>:<remote_port>``; yields its URL."""
    local = free_port()
    argv = [kubectl, *(["--context", context] if context else [])]
    argv += ["port-forward", "--address", "127.0.0.1"]
    if namespace:
        argv += ["-n", namespace]
    argv += [f"svc/{service}", f"{local}:{remote_port}"]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    ready = threading.Event()

    def watch_stdout() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "Forwarding from" in line:
                ready.set()
        ready.set()  # kubectl exited: wake the waiter, which then reads its status

    watcher = threading.Thread(target=watch_stdout, daemon=True)
    watcher.start()
    try:
        if not ready.wait(READY_TIMEOUT):
            raise CliError(f"kubectl port-forward svc/{service} not ready in {READY_TIMEOUT:g}s")
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr is not None else ""
            where = f" in namespace {namespace}" if namespace else ""
            raise CliError(f"cannot reach svc/{service}{where}: {first_line(err)}")
        yield f"http://127.0.0.1:{local}"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        watcher.join(timeout=1)
