"""Start project services as real processes on loopback ports, and stop them cleanly.

Services run as subprocesses (not in the test's event loop) because Mem0 and other
synchronous libraries would otherwise block the loop that also serves their requests.
Readiness is awaited by polling the service's own health endpoint with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent


# Every port free_port has handed out in this process: the OS may pick the same free port
# twice in a row, and a service planned on a port another one already holds would have
# that one's answers taken for its own.
_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (the OS picks it), never one this
    process handed out before."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def _listener_sockets(port: int, pid: int) -> set[str]:
    """The ``socket:[inode]`` names of the TCP listeners on ``port`` in the network
    namespace of ``pid`` (the kernel's tables: state 0A is LISTEN)."""
    found: set[str] = set()
    for table in (f"/proc/{pid}/net/tcp", f"/proc/{pid}/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(f"socket:[{fields[9]}]")
    return found


def _session_pids(session: int) -> list[int]:
    """The processes of ``session``: a service started by start_service and its children."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            # After the command's closing parenthesis: state, ppid, pgrp, session.
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3]) == session:
                pids.append(int(entry.name))
    return pids


def listens_on(proc: subprocess.Popen[bytes], port: int) -> bool:
    """Whether the listener on ``port`` is a socket of ``proc`` or its children. True where
    the kernel's tables cannot be read (not Linux): nothing there to tell."""
    if not Path("/proc/net/tcp").exists():
        return True
    # The tables of the process's own network namespace (it may run in another).
    sockets = _listener_sockets(port, proc.pid)
    for pid in _session_pids(proc.pid):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in sockets:
                        return True
    return False


def console_script(name: str) -> str:
    """Path of a console script installed in this interpreter's environment."""
    path = VENV_BIN / name
    return str(path) if path.exists() else name


@dataclass
class ServiceProcess:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Send ``sig`` and wait; escalate to SIGKILL of the whole group after ``timeout``."""
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
                return self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.wait()

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def wait_http_ok(
    url: str, proc: subprocess.Popen[bytes] | None, timeout: float, port: int | None = None
) -> None:
    """Poll ``url`` until it answers 200. With ``proc`` and ``port``: only an answer from
    ``proc``'s own listener counts, so a process that could not bind (another holds the
    port) is not taken for ready; it exits, and that is raised."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} answered")
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if resp.status == 200:
                    if proc is None or port is None or listens_on(proc, port):
                        return
                    last = f"port {port} answered by a process that is not this service"
                else:
                    last = f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        time.sleep(0.05)  # polling interval of a readiness wait, not a synchronisation
    raise TimeoutError(f"{url} not ready after {timeout}s: {last}")


def start_service(
    name: str,
    argv: Sequence[str],
    *,
    port: int,
    env: Mapping[str, str] | None = None,
    log_dir: Path,
    ready_path: str = "/readyz",
    timeout: float = 60.0,
    host: str = "127.0.0.1",
) -> ServiceProcess:
    """Start ``argv`` in its own process group and wait until ``ready_path`` answers 200
    (at ``host``: another address where the process runs in another network namespace)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    full_env = {**os.environ, **(env or {})}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            list(argv),
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=REPO_ROOT,
        )
    svc = ServiceProcess(
        name=name, proc=proc, port=port, log_path=log_path, env=dict(env or {}), host=host
    )
    try:
        wait_http_ok(f"{svc.url}{ready_path}", proc, timeout, port)
    except Exception as exc:
        svc.kill()
        raise RuntimeError(
            f"{name} failed to start: {exc}\n--- log tail ---\n{svc.log_tail()}"
        ) from exc
    return svc


# A failing test's report carries the log tails of the services it started (the hook is in
# tests/fixtures/service_logs.py): a service's own account of why is the first thing to read.
SERVICE_LOGS = pytest.StashKey[list[ServiceProcess]]()


def attach_service_log(node: pytest.Item | pytest.Collector, service: ServiceProcess) -> None:
    """Show ``service``'s log tail in the report of a failing test under ``node``."""
    node.stash.setdefault(SERVICE_LOGS, []).append(service)
