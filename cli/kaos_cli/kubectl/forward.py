"""Reach an in-cluster Service from the user's machine: ``kubectl port-forward``.

kubectl chooses the local port itself (``svc/<name> :<port>``) and announces it
("Forwarding from 127.0.0.1:NNNNN -> PORT"); the forward is ready once that line is read,
so no port is picked here and handed over (another process could take it in between).
If kubectl exits first (no such Service, no ready pod) its error becomes the caller's,
naming the Service and the cause. Once running, kubectl reports each connection it could
not forward to the pod on stderr; that is kept, so a request that fails through the
forward says why.

``port_forward`` holds a forward for one CLI command; ``Forwards`` keeps one per Service
for the console's lifetime and restarts it when it died.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from kaos_cli.kubectl.aio import Cluster, ClusterError, stop
from kaos_cli.kubectl.sync import context_argv
from kaos_cli.tools import CliError, first_line, without_prefix

READY_TIMEOUT = 30.0
# kubectl reports a connection it could not forward as it closes it, so the client may see
# the closed connection first: how long to give kubectl to say why.
CAUSE_WAIT = 2.0
_ANNOUNCED = re.compile(r"Forwarding from (?:127\.0\.0\.1|\[::1\]):(?P<port>\d+) -> \d+")
# kubectl's klog lines quote the error: err="an error occurred forwarding ... refused"
_QUOTED_ERROR = re.compile(r'err="(?P<err>(?:[^"\\]|\\.)*)"')
_KEPT_LINES = 20
# A forwarding error that names no cause, only that the stream ended.
_BARE_END = re.compile(r"(?:^|: )(?:EOF|unexpected EOF|broken pipe|connection reset by peer)$")


class Unreachable(CliError):
    """A request got no answer (the connection failed, broke or timed out). Raised in a
    ``port_forward`` block, it leaves carrying what kubectl said about the forward
    (``forward_cause``), so the caller can name the pod and the real cause instead of a
    client error on a local port the user never chose."""

    def __init__(self, message: str, cause: str = "") -> None:
        super().__init__(message)
        self.cause = cause
        self.forward_cause: str | None = None


class ForwardFailed(CliError):
    """kubectl could not start forwarding (no such Service, no ready pod, ...);
    ``reason`` is kubectl's line."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def service_target(endpoint: str | None, name: str, default_port: int) -> tuple[str, int]:
    """The Service name and port behind a resource's ``status.endpoint``
    (``http://<svc>.<ns>.svc...:<port>``), else ``name`` and ``default_port``."""
    if endpoint:
        parts = urlsplit(endpoint)
        if parts.hostname:
            return parts.hostname.split(".", 1)[0], parts.port or default_port
    return name, default_port


def forward_args(namespace: str | None, service: str, remote_port: int) -> list[str]:
    """``port-forward`` to ``svc/<service>``, the local port left to kubectl."""
    args = ["port-forward", "--address", "127.0.0.1"]
    if namespace:
        args += ["-n", namespace]
    return [*args, f"svc/{service}", f":{remote_port}"]


def announced_port(line: str) -> int | None:
    """The local port of kubectl's "Forwarding from" line, else ``None``."""
    found = _ANNOUNCED.search(line)
    return int(found.group("port")) if found else None


def described(namespace: str | None, service: str) -> str:
    return f"svc/{service}{f' in namespace {namespace}' if namespace else ''}"


def cause_of(lines: Iterable[str]) -> str | None:
    """What kubectl last said went wrong forwarding a connection (the pod, the refusal),
    without klog's prefix or kubectl's ``error:``; ``None`` when it said nothing. The
    quoted error of a klog line is the most specific; kubectl's own last words (``error:
    lost connection to pod``) only come after it."""
    errors = [ln.strip() for ln in lines if "error" in ln.lower()]
    if not errors:
        return None
    quoted = [m.group("err") for m in (_QUOTED_ERROR.search(ln) for ln in errors) if m]
    # A later connection of the same request may end in a bare EOF (the stream to the API
    # server closed): the reason an earlier one gave says more.
    telling = [q for q in quoted if not _BARE_END.search(q)] or quoted
    text = telling[-1].replace('\\"', '"') if telling else without_prefix(errors[-1])
    return " ".join(text.split())


@contextmanager
def port_forward(
    kubectl: str,
    namespace: str | None,
    service: str,
    remote_port: int,
    *,
    context: str | None = None,
) -> Iterator[str]:
    """Forward a local port of kubectl's choosing to ``svc/<service>:<remote_port>``;
    yields its URL. A ``CliError`` raised in the block gains kubectl's cause, if any."""
    proc = subprocess.Popen(
        [*context_argv(kubectl, context), *forward_args(namespace, service, remote_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    ready = threading.Event()
    local: list[int] = []
    said: deque[str] = deque(maxlen=_KEPT_LINES)

    def watch_stdout() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            port = announced_port(line)
            if port is not None and not local:
                local.append(port)
                ready.set()
        ready.set()  # kubectl exited: wake the waiter, which then reads its status

    complained = threading.Event()

    def keep_stderr() -> None:
        # Read on, so kubectl never blocks on a full pipe.
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)
            if "error" in line.lower():
                complained.set()

    readers = [threading.Thread(target=fn, daemon=True) for fn in (watch_stdout, keep_stderr)]
    for reader in readers:
        reader.start()
    where = described(namespace, service)
    try:
        if not ready.wait(READY_TIMEOUT):
            late = cause_of(said) or f"not ready in {READY_TIMEOUT:g}s"
            raise ForwardFailed(f"kubectl port-forward {where}: {late}", late)
        if not local:
            proc.wait()
            readers[1].join(timeout=5)
            line = first_line("".join(said))
            raise ForwardFailed(f"cannot reach {where}: {line}", line)
        try:
            yield f"http://127.0.0.1:{local[0]}"
        except Unreachable as exc:
            complained.wait(CAUSE_WAIT)
            exc.forward_cause = cause_of(said)
            raise
        except ForwardFailed:
            raise
        except CliError as exc:
            said_last = cause_of(said)
            if said_last is None:
                raise
            raise CliError(
                f"{exc.message} (port-forward to {where}: {said_last})", exc.exit_code
            ) from exc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader in readers:
            reader.join(timeout=1)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@dataclass
class _Forward:
    proc: asyncio.subprocess.Process
    url: str
    said: deque[str]
    readers: tuple[asyncio.Task[None], ...] = ()


async def _announced(stdout: asyncio.StreamReader) -> int | None:
    async for raw in stdout:
        port = announced_port(raw.decode(errors="replace"))
        if port is not None:
            return port
    return None


async def _keep(stream: asyncio.StreamReader, said: deque[str] | None = None) -> None:
    with contextlib.suppress(Exception):
        async for raw in stream:
            if said is not None:
                said.append(raw.decode(errors="replace"))


@dataclass
class Forwards:
    """``kubectl port-forward svc/<name>`` per (namespace, service, port), started on first
    use and restarted when it died (the pod behind it changed)."""

    cluster: Cluster
    ready_timeout: float = 20
    _live: dict[tuple[str, str, int], _Forward] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def url(self, namespace: str, service: str, port: int) -> str:
        key = (namespace, service, port)
        async with self._lock:
            live = self._live.get(key)
            if live is not None and live.proc.returncode is None:
                return live.url
            forward = await self._start(namespace, service, port)
            self._live[key] = forward
            return forward.url

    def cause(self, namespace: str, service: str, port: int) -> str | None:
        """What kubectl last said went wrong forwarding to this Service, if anything."""
        live = self._live.get((namespace, service, port))
        return None if live is None else cause_of(live.said)

    async def drop(self, namespace: str, service: str, port: int) -> None:
        """Forget a forward that failed a request (its pod went away)."""
        async with self._lock:
            live = self._live.pop((namespace, service, port), None)
        if live is not None:
            await stop(live.proc)

    async def _start(self, namespace: str, service: str, port: int) -> _Forward:
        proc = await self.cluster.start(*forward_args(namespace, service, port))
        assert proc.stdout is not None and proc.stderr is not None
        try:
            local = await asyncio.wait_for(_announced(proc.stdout), self.ready_timeout)
        except TimeoutError:
            local = None
        if local is None:
            await stop(proc)
            err = (await proc.stderr.read()).decode(errors="replace")
            raise ClusterError.of(
                err or "port-forward not ready", f"port-forward {described(namespace, service)}"
            )
        said: deque[str] = deque(maxlen=_KEPT_LINES)
        # Keep reading both pipes so kubectl never blocks on a full one.
        readers = (
            asyncio.create_task(_keep(proc.stdout)),
            asyncio.create_task(_keep(proc.stderr, said)),
        )
        return _Forward(proc, f"http://127.0.0.1:{local}", said, readers)

    async def close(self) -> None:
        async with self._lock:
            live, self._live = list(self._live.values()), {}
        for forward in live:
            await stop(forward.proc)
