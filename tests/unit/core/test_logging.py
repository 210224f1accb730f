"""The log rate limit (``kaos_core.logging.RateLimitFilter``), on an injected clock."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from kaos_core.logging import RateLimitFilter, configure_logging, request_id_var


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Sink(logging.Handler):
    """A handler that keeps what passes its filters."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self) -> list[str]:
        return [r.getMessage() for r in self.records]


def limited(
    clock: Clock, *, burst: int = 10, logger_burst: int = 100, window: float = 10.0
) -> Sink:
    sink = Sink()
    limiter = RateLimitFilter(
        burst=burst, logger_burst=logger_burst, window=window, clock=clock, emit=sink.handle
    )
    sink.addFilter(limiter)
    return sink


def record(
    msg: str, *args: object, name: str = "svc", level: int = logging.ERROR
) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args or None, None)


ACCEPT_ERROR = (
    "socket.accept() out of system resource\n"
    "socket: <asyncio.TransportSocket fd=6, family=2, type=1, proto=6, laddr=('0.0.0.0', 8080)>"
)


def test_a_flood_of_one_line_is_cut_to_the_burst_then_summarised() -> None:
    clock = Clock()
    sink = limited(clock, burst=10, window=10.0)
    for _ in range(5000):
        sink.handle(record(ACCEPT_ERROR, name="asyncio"))
    assert len(sink.records) == 10
    clock.now += 10.0
    sink.handle(record("next window", name="asyncio"))
    summary, after = sink.records[10:]
    assert summary.getMessage() == (
        "suppressed 4990 similar lines: socket.accept() out of system resource"
    )
    assert vars(summary)["suppressed"] == 4990
    assert summary.levelno == logging.ERROR and summary.name == "asyncio"
    assert after.getMessage() == "next window"


def test_the_kind_is_the_first_line_of_the_template_not_its_arguments() -> None:
    clock = Clock()
    sink = limited(clock, burst=3, window=10.0)
    for port in range(20):
        sink.handle(record("bad request from %s", f"10.0.0.1:{port}"))
        sink.handle(record(ACCEPT_ERROR.replace("fd=6", f"fd={port}")))
    assert len(sink.records) == 6
    # Another level or another logger is another kind.
    sink.handle(record("bad request from %s", "x", level=logging.WARNING))
    sink.handle(record("bad request from %s", "x", name="other"))
    assert len(sink.records) == 8


def test_a_window_without_drops_summarises_nothing() -> None:
    clock = Clock()
    sink = limited(clock, burst=10, window=10.0)
    for step in range(30):
        sink.handle(record("tick"))
        clock.now += 1.0  # ten records per ten seconds: exactly the burst
        assert len(sink.records) == step + 1
    assert not [m for m in sink.messages() if m.startswith("suppressed")]


def test_counts_restart_each_window() -> None:
    clock = Clock()
    sink = limited(clock, burst=2, window=5.0)
    for _ in range(3):
        for _ in range(4):
            sink.handle(record("again"))
        clock.now += 5.0
    sink.handle(record("again"))
    assert sink.messages() == [
        "again",
        "again",
        "suppressed 2 similar lines: again",
        "again",
        "again",
        "suppressed 2 similar lines: again",
        "again",
        "again",
        "suppressed 2 similar lines: again",
        "again",
    ]


def test_a_logger_whose_every_line_differs_is_bounded_too() -> None:
    clock = Clock()
    sink = limited(clock, burst=5, logger_burst=50, window=10.0)
    for i in range(10_000):
        sink.handle(record(f"peer 10.0.{i // 256}.{i % 256} sent garbage", name="noisy"))
    assert len(sink.records) == 50
    sink.handle(record("quiet line", name="other"))
    assert len(sink.records) == 51
    clock.now += 10.0
    limiter = sink.filters[0]
    assert isinstance(limiter, RateLimitFilter)
    limiter.flush()
    assert sink.messages()[-1] == "suppressed 9950 more lines"
    assert sink.records[-1].name == "noisy"


def test_flush_emits_the_pending_summary_without_waiting_for_a_record() -> None:
    clock = Clock()
    limiter = RateLimitFilter(burst=1, window=10.0, clock=clock)
    sink = Sink()
    limiter.emit = sink.handle
    sink.addFilter(limiter)
    for _ in range(4):
        sink.handle(record("once"))
    limiter.flush()
    assert sink.messages() == ["once", "suppressed 3 similar lines: once"]
    limiter.flush()  # nothing more to say
    assert len(sink.records) == 2


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError):
        RateLimitFilter(burst=0)
    with pytest.raises(ValueError):
        RateLimitFilter(burst=10, logger_burst=5)
    with pytest.raises(ValueError):
        RateLimitFilter(window=0)


@pytest.fixture
def root_restored() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_configure_logging_installs_the_limit_on_its_handler(
    root_restored: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    clock = Clock()
    configure_logging("kaos-test", rate_limit=RateLimitFilter(burst=2, window=10.0, clock=clock))
    log = logging.getLogger("kaos_test.flood")
    token = request_id_var.set("req-1")
    try:
        for _ in range(100):
            log.error(ACCEPT_ERROR)
        clock.now += 10.0
        log.info("after")
    finally:
        request_id_var.reset(token)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [doc["msg"].split("\n")[0] for doc in lines] == [
        "socket.accept() out of system resource",
        "socket.accept() out of system resource",
        "suppressed 98 similar lines: socket.accept() out of system resource",
        "after",
    ]
    summary = lines[2]
    assert summary["level"] == "error" and summary["logger"] == "kaos_test.flood"
    assert summary["suppressed"] == 98 and summary["window_s"] == 10.0
    # The summary belongs to no request, and carries no private marker.
    assert "request_id" not in summary and not [k for k in summary if k.startswith("_")]
    assert lines[3]["request_id"] == "req-1"
