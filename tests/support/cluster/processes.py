"""Processes the harness starts in their own groups and finds again by pid, free ports,
and waiting with a deadline rather than a sleep."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

T = TypeVar("T")
POLL_INTERVAL = 0.1  # seconds between readiness probes; a wait with a deadline, not a sleep


@dataclass
class TrackedProcess:
    """A test service started in its own process group (``popen``), or found again from a
    state file by pid (``popen`` None; then checked to still run ``argv0``)."""

    name: str
    argv0: str
    pid: int
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        if self.popen is not None:
            return self.popen.poll() is None
        return _pid_runs(self.pid, self.argv0)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def signal_group(self, sig: int) -> None:
        # A detached process found again from a state file is only signalled while it
        # still runs our binary, so a recycled pid is never hit.
        if self.popen is None and not _pid_runs(self.pid, self.argv0):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        if self.popen is not None and self.popen.poll() is None and sig == signal.SIGKILL:
            with contextlib.suppress(ProcessLookupError):
                self.popen.kill()

    def stop(self, grace: float) -> None:
        """SIGTERM to its group; SIGKILL after ``grace`` seconds; reaped."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            self.signal_group(sig)
            deadline = time.monotonic() + grace
            while self.alive() and time.monotonic() < deadline:
                time.sleep(POLL_INTERVAL / 5)
            if not self.alive():
                break
        self.reap()

    def reap(self) -> None:
        if self.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=0)

    def to_json(self) -> dict[str, Any]:
        """What a state file keeps of it (read back by ``from_json``)."""
        return {"name": self.name, "pid": self.pid, "argv0": self.argv0, "log": str(self.log)}

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> Self:
        return cls(entry["name"], entry["argv0"], int(entry["pid"]), Path(entry["log"]))


def _pid_runs(pid: int, argv0: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return cmdline == argv0 and state != "Z"


def _die_with_parent() -> None:
    """In the child: get SIGKILL when the process that started it dies (Linux), so a
    test run that is killed leaves no control plane behind."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _free_ports(count: int) -> list[int]:
    """Ports the OS hands out as free on 127.0.0.1, all held at once so they differ."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def wait_until(
    probe: Callable[[], T | None], *, timeout: float = 60.0, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy and return that; fail with the
    last value it returned when ``timeout`` passes. A wait with a deadline, not a sleep."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {value!r}")
        time.sleep(POLL_INTERVAL)


def processes_mentioning(text: str) -> list[int]:
    """Pids of running processes whose command line contains ``text`` (for leak checks)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text in cmdline and state != "Z":
            found.append(int(entry.name))
    return found
