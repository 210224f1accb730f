"""Idle and half-sent connections never become an outage, on every server.

Each service runs as its real process with an open-file limit of 1,024 (soft and hard)
and 2-second idle and body timeouts (``KAOS_HTTP_IDLE_TIMEOUT``, ``_BODY_TIMEOUT``). The
test holds 2,000 connections against it: silent ones, ones that sent half a request head,
and ones that sent a complete head and part of a body. While they are held a fresh
``/healthz`` keeps answering 200 (the cap closes the longest-idle connections to make
room); then every held connection is closed by the server within the timeouts, the
process is alive and answers, its descriptors are released, and its log stayed small,
without the "Too many open files" flood. Services: the memory service (local storage),
the agent, the MCP runtime (uvicorn), the operator (its kubeconfig names an API server
that is not there: it serves its health endpoints and retries its election) and the
development model server.

A second test fills a small ``KAOS_HTTP_MAX_CONNECTIONS`` with busy requests: a newcomer
is answered 503 with the JSON error, on an aiohttp service and on the MCP runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import resource
import socket
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from kaos_agent.mcp_runtime.settings import McpSettings
from kaos_core.http import limits as http_limits
from kaos_core.http.limits import HttpLimits
from kaos_core.http.server import ConnectionGuard, GuardedListener
from kaos_devmodel import DevModelSettings

from tests.fixtures.agent import agent_env
from tests.fixtures.memory import memory_env
from tests.support.devmodel import DevModel
from tests.support.procs import ServiceProcess, console_script, free_port, start_service

LOW_NOFILE = 1024
HELD = 2000
BATCH = 250
IDLE_TIMEOUT = 2.0
BODY_TIMEOUT = 2.0
# Idle timeout for silent and half-sent connections; body timeout, then at most as long
# again draining the unread rest (lingering), for partial bodies; plus room for 2 cores.
CLOSE_WITHIN = IDLE_TIMEOUT + 2 * BODY_TIMEOUT + 8.0
HTTP_ENV = {
    "KAOS_HTTP_IDLE_TIMEOUT": f"{IDLE_TIMEOUT:g}",
    "KAOS_HTTP_BODY_TIMEOUT": f"{BODY_TIMEOUT:g}",
    "KAOS_HTTP_MAX_CONNECTIONS": "",
}
# Lines the log may gain while the 2,000 connections come and go.
MAX_LOG_LINES = 200
MAX_LOG_BYTES = 100_000
FLOOD_MARKERS = ("Too many open files", "out of system resource")

# Runs the service with the low open-file limit: the wrapper sets it, then becomes it.
_LIMITED = (
    "import os, resource, sys; "
    f"resource.setrlimit(resource.RLIMIT_NOFILE, ({LOW_NOFILE}, {LOW_NOFILE})); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)
TOOLS = "def echo(text: str) -> str:\n    return text\n"


def limited(*argv: str) -> list[str]:
    return [sys.executable, "-c", _LIMITED, *argv]


@dataclass
class Target:
    name: str
    proc: ServiceProcess
    post_path: str  # a route whose body goes through the body timeout

    @property
    def port(self) -> int:
        return self.proc.port


@pytest.fixture(scope="module")
def many_descriptors() -> Iterator[None]:
    """This process holds 2,000 sockets: its soft open-file limit goes to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < HELD + 512:
        pytest.skip(f"the hard open-file limit ({hard}) is too low to hold {HELD} sockets")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _kubeconfig(path: Path) -> Path:
    # An API server nobody listens on: the operator serves /healthz and retries its election.
    server = f"https://127.0.0.1:{free_port()}"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "none", "cluster": {"server": server}}],
        "users": [{"name": "none", "user": {"token": "none"}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}],
        "current-context": "none",
    }
    path.write_text(json.dumps(config))
    return path


def _start(name: str, root: Path, devmodel: DevModel) -> Target:
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    logs = root / "logs"
    if name == "memory":
        env = memory_env(
            backend="local",
            data_dir=root / "memory",
            dsn=None,
            model_base_url=devmodel.base_url,
            port=port,
            overrides={},
        )
        argv, ready, post = limited(console_script("kaos-memory")), "/readyz", "/v1/write"
    elif name == "agent":
        env = agent_env(devmodel, port, "hygiene")
        argv, ready, post = limited(console_script("kaos-agent")), "/readyz", "/v1/chat/completions"
    elif name == "mcp":
        env = dict.fromkeys(McpSettings.env_names(), "")
        env.update({"MCP_HOST": "127.0.0.1", "MCP_PORT": str(port), "MCP_TOOLS_STRING": TOOLS})
        argv, ready, post = limited(console_script("kaos-mcp")), "/readyz", "/mcp"
    elif name == "operator":
        env = {
            "KUBECONFIG": str(_kubeconfig(root / "kubeconfig")),
            "KAOS_OPERATOR_WATCH_NAMESPACE": "kaos-hygiene",
            "KAOS_OPERATOR_NAMESPACE": "kaos-hygiene",
            "KAOS_OPERATOR_HOST": "127.0.0.1",
            "KAOS_OPERATOR_PORT": str(port),
            "KAOS_OPERATOR_IDENTITY": "op-hygiene",
        }
        # No API server, so never ready; its only POST-free routes: a POST is 405.
        argv, ready, post = limited(console_script("kaos-operator")), "/healthz", "/healthz"
    elif name == "devmodel":
        env = {DevModelSettings.env_name(field): "" for field in DevModelSettings.model_fields}
        argv = limited(console_script("kaos-devmodel"), "--port", str(port))
        ready, post = "/readyz", "/v1/chat/completions"
    else:
        raise AssertionError(name)
    svc = start_service(
        f"{name}-hygiene",
        argv,
        port=port,
        env={**env, **HTTP_ENV},
        log_dir=logs,
        ready_path=ready,
        timeout=120,
    )
    return Target(name=name, proc=svc, post_path=post)


SERVICES = ["memory", "agent", "mcp", "operator", "devmodel"]


@pytest.fixture(scope="module")
def targets(
    devmodel_server: ServiceProcess, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Target]]:
    """The five services, started together (each takes seconds, mostly imports)."""
    devmodel = DevModel(url=devmodel_server.url)
    root = tmp_path_factory.mktemp("hygiene")
    started: dict[str, Target] = {}
    with ThreadPoolExecutor(len(SERVICES)) as pool:
        futures = {name: pool.submit(_start, name, root / name, devmodel) for name in SERVICES}
        errors = []
        for name, future in futures.items():
            try:
                started[name] = future.result()
            except Exception as exc:  # noqa: BLE001 - reported together below
                errors.append(f"{name}: {exc}")
    try:
        if errors:
            raise RuntimeError("\n".join(errors))
        yield started
    finally:
        statuses = {name: target.proc.stop(timeout=15) for name, target in started.items()}
    # After all that, SIGTERM still ends each one cleanly.
    assert all(status == 0 for status in statuses.values()), statuses


# -- raw HTTP over asyncio streams ------------------------------------------------------


def status_of(data: bytes) -> int | None:
    """The status of the first answer in ``data`` (None: no answer)."""
    if not data:
        return None
    line = data.split(b"\r\n", 1)[0].split()
    assert len(line) >= 2 and line[0].startswith(b"HTTP/1."), data[:200]
    return int(line[1])


async def get(port: int, path: str = "/healthz", within: float = 5.0) -> tuple[int | None, bytes]:
    """A fresh connection, one GET, the whole answer (``Connection: close``)."""

    async def exchange() -> bytes:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            return await reader.read()
        finally:
            writer.close()

    data = await asyncio.wait_for(exchange(), within)
    return status_of(data), data


@dataclass
class Held:
    kind: str
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter


def opening(kind: str, post_path: str) -> bytes:
    if kind == "silent":
        return b""
    if kind == "half":
        # The request head without its final blank line.
        return b"GET /healthz HTTP/1.1\r\nHost: x\r\nUser-Agent: slow\r\n"
    # A complete head and 6 of its 100 body bytes.
    return (
        f"POST {post_path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n"
        '{"a": '
    ).encode()


def kind_of(i: int) -> str:
    return "body" if i % 10 == 0 else ("half" if i % 2 else "silent")


async def hold(port: int, post_path: str, first: int, count: int) -> list[Held]:
    async def one(i: int) -> Held:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
        kind = kind_of(i)
        data = opening(kind, post_path)
        if data:
            writer.write(data)
        return Held(kind, reader, writer)

    return list(await asyncio.gather(*(one(i) for i in range(first, first + count))))


async def closed_by_server(held: Held, deadline: float) -> tuple[str, int | None]:
    """How the server ended ``held``: ("eof", status of what it answered) or ("reset", None)."""
    remaining = max(0.0, deadline - time.monotonic())
    try:
        data = await asyncio.wait_for(held.reader.read(), remaining)
    except (ConnectionResetError, BrokenPipeError):
        return "reset", None
    except TimeoutError:
        return "open", None
    return "eof", status_of(data)


async def close_all(held: list[Held]) -> None:
    """Close the client ends (an asyncio close completes only once the loop runs)."""
    for h in held:
        h.writer.close()
    await asyncio.wait_for(
        asyncio.gather(*(h.writer.wait_closed() for h in held), return_exceptions=True), 10
    )


def open_descriptors(pid: int) -> int | None:
    fd_dir = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(OSError):
        return len(os.listdir(fd_dir))
    return None


def log_since(proc: ServiceProcess, offset: int) -> bytes:
    with proc.log_path.open("rb") as f:
        f.seek(offset)
        return f.read()


# -- the tests --------------------------------------------------------------------------


@pytest.mark.parametrize("service", SERVICES)
async def test_held_connections_are_closed_and_health_keeps_answering(
    service: str, targets: dict[str, Target], many_descriptors: None
) -> None:
    target = targets[service]
    proc = target.proc
    log_offset = proc.log_path.stat().st_size
    fds_before = open_descriptors(proc.proc.pid)

    held: list[Held] = []
    slow_probes: list[float] = []
    try:
        for first in range(0, HELD, BATCH):
            held += await hold(target.port, target.post_path, first, BATCH)
            # While the connections are held, a newcomer is served (an idle one made room).
            started = time.monotonic()
            status, data = await get(target.port)
            assert status == 200, (first, data[:300], proc.log_tail())
            slow_probes.append(time.monotonic() - started)
        opened_all = time.monotonic()
        assert Counter(h.kind for h in held) == {"silent": 800, "half": 1000, "body": 200}

        # Every held connection is closed by the server, within the timeouts.
        deadline = opened_all + CLOSE_WITHIN
        outcomes = await asyncio.gather(*(closed_by_server(h, deadline) for h in held))
        ends = list(zip(held, outcomes, strict=True))
        still_open = Counter(h.kind for h, (how, _) in ends if how == "open")
        assert not still_open, f"open after {CLOSE_WITHIN:g} s: {dict(still_open)}"
        answers = Counter((h.kind, status) for h, (_, status) in ends)
        allowed = {None, 408, 503}
        for (kind, status), count in answers.items():
            # A partial body may also be refused for its route (405 on the operator).
            assert status in allowed or (kind == "body" and status == 405), (kind, status, count)
    finally:
        await close_all(held)

    # Still alive, still answering, descriptors released, and a small log.
    assert proc.alive(), proc.log_tail()
    status, data = await get(proc.port)
    assert status == 200, data[:300]
    fds_after = open_descriptors(proc.proc.pid)
    if fds_before is not None and fds_after is not None:
        assert fds_after <= fds_before + 32, (fds_before, fds_after)
    assert max(slow_probes) < 5.0, slow_probes
    grown = log_since(proc, log_offset)
    text = grown.decode("utf-8", "replace")
    assert len(grown) < MAX_LOG_BYTES and text.count("\n") < MAX_LOG_LINES, (
        f"{len(grown)} bytes, {text.count(chr(10))} lines:\n{text[-3000:]}"
    )
    assert not [m for m in FLOOD_MARKERS if m in text], text[-3000:]


def _start_small(name: str, root: Path) -> Target:
    """A service whose cap is 8 connections, with time to look at busy requests."""
    port = free_port()
    small = {
        "KAOS_HTTP_MAX_CONNECTIONS": "8",
        "KAOS_HTTP_IDLE_TIMEOUT": "30",
        "KAOS_HTTP_BODY_TIMEOUT": "30",
    }
    if name == "devmodel":
        env = {DevModelSettings.env_name(field): "" for field in DevModelSettings.model_fields}
        argv = [console_script("kaos-devmodel"), "--port", str(port)]
        post = "/v1/chat/completions"
    else:
        env = dict.fromkeys(McpSettings.env_names(), "")
        env.update({"MCP_HOST": "127.0.0.1", "MCP_PORT": str(port), "MCP_TOOLS_STRING": TOOLS})
        argv, post = [console_script("kaos-mcp")], "/mcp"
    svc = start_service(
        f"{name}-small", argv, port=port, env={**env, **small}, log_dir=root, ready_path="/healthz"
    )
    return Target(name=name, proc=svc, post_path=post)


@pytest.mark.parametrize("service", ["devmodel", "mcp"])
async def test_a_newcomer_beyond_a_cap_of_busy_connections_is_answered_503(
    service: str, tmp_path: Path
) -> None:
    target = _start_small(service, tmp_path)
    busy: list[Held] = []
    try:
        # Eight requests in flight: each has its head read and its body awaited, which the
        # server shows by asking for the body (100 Continue).
        for _ in range(8):
            reader, writer = await asyncio.open_connection("127.0.0.1", target.port)
            busy.append(Held("busy", reader, writer))
            writer.write(
                f"POST {target.post_path} HTTP/1.1\r\nHost: x\r\n"
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                "Expect: 100-continue\r\nContent-Length: 100\r\n\r\n".encode()
            )
            line = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            assert status_of(line) == 100, line

        status, data = await get(target.port)
        assert status == 503, data
        head, _, body = data.partition(b"\r\n\r\n")
        assert b"content-type: application/json" in head.lower()
        assert json.loads(body)["error"]["code"] == "too_many_connections"

        # Once a busy request is done (here: its client leaves), a newcomer is served.
        await close_all([busy.pop()])

        async def served() -> int | None:
            while True:
                status, _ = await get(target.port)
                if status == 200:
                    return status
                await asyncio.sleep(0.05)  # poll interval of a bounded wait

        assert await asyncio.wait_for(served(), 10) == 200
        assert target.proc.alive()
    finally:
        await close_all(busy)
        status = target.proc.stop(timeout=15)
    assert status == 0, f"SIGTERM ended it with {status}:\n{target.proc.log_tail()}"


# -- the cap derived from the open-file limit ---------------------------------------------


def test_the_cap_stays_below_the_open_file_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    room = LOW_NOFILE - http_limits.FD_RESERVE - http_limits.ACCEPT_HEADROOM
    monkeypatch.setattr(resource, "getrlimit", lambda _: (LOW_NOFILE, LOW_NOFILE))
    assert HttpLimits.from_env({}).connection_cap() == room
    # A configured cap above what the descriptors allow is lowered to it.
    assert HttpLimits.from_env({"KAOS_HTTP_MAX_CONNECTIONS": "5000"}).connection_cap() == room
    assert HttpLimits.from_env({"KAOS_HTTP_MAX_CONNECTIONS": "100"}).connection_cap() == 100
    monkeypatch.setattr(resource, "getrlimit", lambda _: (resource.RLIM_INFINITY,) * 2)
    assert HttpLimits.from_env({}).connection_cap() == http_limits.DEFAULT_MAX_CONNECTIONS


async def test_a_dripping_head_is_cut_at_the_idle_timeout(
    targets: dict[str, Target], many_descriptors: None
) -> None:
    """Bytes that trickle in never re-arm the timer: a head must be complete in time."""

    async def drip(port: int) -> float:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        started = time.monotonic()

        async def trickle() -> None:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            with contextlib.suppress(ConnectionError):
                while True:
                    writer.write(b"a")
                    await writer.drain()
                    await asyncio.sleep(0.2)  # the client's pace, not a synchronisation

        sender = asyncio.ensure_future(trickle())
        try:
            with contextlib.suppress(ConnectionResetError):
                assert await asyncio.wait_for(reader.read(), IDLE_TIMEOUT + 5) == b""
            return time.monotonic() - started
        finally:
            sender.cancel()
            writer.close()

    lasted = await asyncio.gather(*(drip(t.port) for t in targets.values() for _ in range(3)))
    assert all(IDLE_TIMEOUT - 0.5 <= t <= IDLE_TIMEOUT + 3 for t in lasted), lasted


# -- the guard and the listener in this process -------------------------------------------


@dataclass
class FakeSocket:
    fd: int

    def fileno(self) -> int:
        return self.fd


class FakeTransport(asyncio.Transport):
    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.closed = False
        self.aborted = False
        self.eof = False
        self.written = b""
        self.unsent = 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return FakeSocket(self.fd) if name == "socket" else default

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = self.closed = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def get_write_buffer_size(self) -> int:
        return self.unsent


@dataclass(eq=False)
class Conn:
    transport: FakeTransport
    busy: bool = False
    muted: bool = False


def fake_guard(cap: int) -> ConnectionGuard[Conn]:
    def close(conn: Conn) -> None:
        conn.transport.close()

    def mute(conn: Conn) -> None:
        conn.muted = True

    return ConnectionGuard(
        cap, is_idle=lambda c: not c.busy and not c.transport.closed, close=close, mute=mute
    )


async def test_the_guard_evicts_the_longest_open_idle_connection_then_refuses() -> None:
    guard = fake_guard(3)
    conns = [Conn(FakeTransport(fd)) for fd in range(3)]
    for conn in conns:
        assert guard.admit(conn, conn.transport)
    conns[0].busy = True
    conns[1].transport.unsent = 10  # a peer that does not read: dropped, not waited for
    newcomer = Conn(FakeTransport(3))
    assert guard.admit(newcomer, newcomer.transport)
    assert conns[1].transport.aborted and not conns[0].transport.closed
    assert guard.evicted == 1 and guard.open_count == 3

    for conn in (conns[2], newcomer):
        conn.busy = True
    refused = Conn(FakeTransport(4))
    assert not guard.admit(refused, refused.transport)
    assert refused.muted and refused.transport.eof and not refused.transport.closed
    assert refused.transport.written.startswith(b"HTTP/1.1 503 ")
    assert guard.refused == 1 and guard.open_count == 3
    # Until they are gone, evicted and refused connections still hold descriptors; only
    # the evicted one is about to free its place (a refused one lingers for its answer).
    assert guard.held() == 5 and guard.room_coming()
    guard.release(conns[1])
    assert guard.held() == 4 and not guard.room_coming()
    guard.release(refused)
    assert guard.held() == 3


def test_the_listener_waits_for_room_then_answers_503_itself() -> None:
    now = [0.0]
    guard = fake_guard(1)
    guard.headroom = 1
    for fd in (1000, 1001):  # accepted, not yet seen by a protocol: the budget is full
        guard.accepted(fd)
    with GuardedListener(socket.AF_INET, guard, clock=lambda: now[0]) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)  # as asyncio has it
        with socket.create_connection(listener.getsockname(), timeout=5) as client:
            # No room yet: the connection waits in the kernel's queue.
            with pytest.raises(BlockingIOError):
                listener.accept()
            # The budget stayed full for longer than the grace: it is answered and closed.
            now[0] += 2.0
            with pytest.raises(BlockingIOError):
                listener.accept()
            answer = client.recv(4096)
            assert answer.startswith(b"HTTP/1.1 503 ") and b"too_many_connections" in answer
            assert client.recv(4096) == b""
        assert guard.refused == 1


def test_the_listener_reports_running_out_of_descriptors_once_per_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def out_of_files(self: socket.socket) -> tuple[socket.socket, object]:
        raise OSError(errno.EMFILE, "Too many open files")

    guard = fake_guard(8)
    with GuardedListener(socket.AF_INET, guard) as listener:
        monkeypatch.setattr(socket.socket, "accept", out_of_files)
        # asyncio reports the first and pauses the listener; the rest of its batch
        # ends quietly instead of adding one report each.
        with pytest.raises(OSError) as first:
            listener.accept()
        assert first.value.errno == errno.EMFILE
        with pytest.raises(BlockingIOError):
            listener.accept()
        # After the pause the next attempt is a real one again.
        with pytest.raises(OSError) as again:
            listener.accept()
        assert again.value.errno == errno.EMFILE
