"""What the memory benchmarks share: percentiles, the PostgreSQL check, the development
model server they point the services at, the start of a memory service and the reading of
its metrics (imported by the scripts beside it)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import aiohttp

from tests.support.cluster.host import cache_dir
from tests.support.postgres import admin_dsn_from_env, server_error
from tests.support.procs import ServiceProcess, console_script, free_port, start_service

REPO = Path(__file__).resolve().parents[2]


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


def memory_service(name: str, env: dict[str, str], log_dir: Path) -> ServiceProcess:
    """``kaos-memory`` on a free loopback port, logging warnings only, with ``env`` (its
    storage, model and tuning variables) on top; ready when it answers ``/readyz``."""
    port = free_port()
    full = {
        "KAOS_MEMORY_HOST": "127.0.0.1",
        "KAOS_MEMORY_PORT": str(port),
        "KAOS_MEMORY_LOG_LEVEL": "WARNING",
        **env,
    }
    return start_service(
        f"memory-{name}",
        [console_script("kaos-memory")],
        port=port,
        env=full,
        log_dir=log_dir,
        timeout=180,
    )


Metrics = dict[str, float]


async def metrics(http: aiohttp.ClientSession, url: str) -> Metrics:
    """The service's ``/metrics`` samples, by name with their labels as written
    (``kaos_memory_folds_total{outcome="done"}``)."""
    async with http.get(f"{url}/metrics") as resp:
        text = await resp.text()
    samples: Metrics = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


async def until_metrics(
    http: aiohttp.ClientSession,
    url: str,
    done: Callable[[Metrics], bool],
    what: str,
    within: float = 600,
) -> Metrics:
    """Poll ``/metrics`` until ``done`` says so (polling, not timing: a bench may); the
    samples that satisfied it. ``TimeoutError`` naming ``what`` after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        samples = await metrics(http, url)
        if done(samples):
            return samples
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} after {within:.0f} s")
        await asyncio.sleep(0.5)  # polling interval, not a synchronisation


def all_zero(*names: str) -> Callable[[Metrics], bool]:
    """``until_metrics``'s test that every one of ``names`` is exported and 0."""
    return lambda samples: all(samples.get(name) == 0 for name in names)


def before_path(ref: str) -> str:
    """``PYTHONPATH`` that runs the service's code as of ``ref``: the commit's tree, cached
    by commit under ``~/.cache/kaos/bench-before`` (ahead of the editable install, whose
    finders come after the path)."""
    sha = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    tree = cache_dir() / "bench-before" / sha
    if not tree.exists():
        partial = tree.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", sha, "core", "images/memory"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        partial.rename(tree)
    return os.pathsep.join(str(tree / part) for part in ("images/memory", "core"))


# The test cluster's processes on this machine (hack/test-cluster), by program name.
CONTROL_PLANE = ("kube-apiserver", "kube-controller-manager", "etcd", "kube-scheduler", "kwok")


def processes_named(names: tuple[str, ...]) -> dict[int, str]:
    """pid -> program name of this machine's processes whose program is one of ``names``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            program = (entry / "cmdline").read_bytes().split(b"\0", 1)[0].decode()
        except OSError:
            continue  # ended while listed
        name = os.path.basename(program)
        if name in names:
            found[int(entry.name)] = name
    return found


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` (all its threads) so far; OSError once it ended."""
    # After the command's closing parenthesis: utime and stime are fields 14 and 15.
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_seconds_if_running(pid: int) -> float | None:
    try:
        return cpu_seconds(pid)
    except OSError:
        return None


class CpuShare:
    """What each watched process used of the CPU between ``start`` and ``stop``: CPU
    seconds and cores (seconds over the window), to say where a bring-up's time went."""

    def __init__(self, processes: dict[int, str]) -> None:
        self._names = processes
        self._start: dict[int, float] = {}
        self._started = 0.0
        self.used: dict[str, float] = {}
        self.window = 0.0

    def start(self) -> None:
        self._started = time.monotonic()
        self._start = {}
        for pid in self._names:
            used = _cpu_seconds_if_running(pid)
            if used is not None:
                self._start[pid] = used

    def stop(self) -> None:
        self.window = time.monotonic() - self._started
        self.used = {}
        for pid, before in self._start.items():
            after = _cpu_seconds_if_running(pid)
            if after is not None:
                name = self._names[pid]
                self.used[name] = self.used.get(name, 0.0) + after - before

    def line(self) -> str:
        """``name seconds (cores)``, most first, and the machine's cores for scale."""
        if not self.used:
            return "CPU: nothing measured"
        parts = [
            f"{name} {used:.1f}s ({used / self.window:.2f})"
            for name, used in sorted(self.used.items(), key=lambda item: -item[1])
        ]
        total = sum(self.used.values())
        return (
            f"CPU over {self.window:.1f}s, seconds (cores): "
            + ", ".join(parts)
            + f"; all {total:.1f}s ({total / self.window:.2f} of {os.cpu_count()} cores)"
        )
