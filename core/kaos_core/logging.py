"""JSON logs with the request id of the request being served, rate-limited.

The request id lives in a context variable set by the request-id middleware, so any log
line emitted while serving a request (including from storage code) carries it without
threading it through call signatures.

Whatever a client can make a service log once, a flood makes it log thousands of times a
second (asyncio's "socket.accept() out of system resource" once filled 142,483 lines in
30 s). ``RateLimitFilter`` on the one handler lets at most ``burst`` records of one kind
through per window and says how many it dropped when the window ends.
"""

from __future__ import annotations

import atexit
import contextvars
import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "kaos_request_id", default=None
)

# Attributes every LogRecord has; anything else passed through ``extra=`` is emitted.
_STANDARD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {
    "message",
    "asctime",
    "taskName",
}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, extras."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = request_id_var.get()
        if rid is not None:
            doc["request_id"] = rid
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRS and not key.startswith("_"):
                doc[key] = value
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


# Records of one kind (logger, level, first line of the message) let through per window,
# and records of one logger whatever their kind (messages that embed changing values).
DEFAULT_BURST = 10
DEFAULT_LOGGER_BURST = 100
DEFAULT_WINDOW = 10.0
# The part of a message that names its kind: asyncio and others append variable details
# (a socket's repr, a peer address) after the first line.
_KEY_CHARS = 120
# Underscored: the JSON formatter leaves it out.
_SUMMARY_ATTR = "_kaos_rate_summary"


def _kind(record: logging.LogRecord) -> str:
    text = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
    return text.split("\n", 1)[0][:_KEY_CHARS]


@dataclass
class _Count:
    passed: int = 0
    suppressed: int = 0
    levelno: int = logging.INFO


class RateLimitFilter(logging.Filter):
    """At most ``burst`` records per kind and ``logger_burst`` per logger in a window.

    Windows are fixed (all counts restart together every ``window`` seconds of
    ``clock``). When a window with dropped records has ended, the next record that
    reaches the filter (or ``flush()``, called at exit) first emits one summary line per
    kind, or per logger, that lost records: "suppressed K similar lines: <message>", with
    ``suppressed`` and ``similar_to`` as fields. Summaries go to ``emit`` (the handler's
    ``handle``) and are never filtered themselves. Thread-safe: worker threads log too.
    """

    def __init__(
        self,
        *,
        burst: int = DEFAULT_BURST,
        logger_burst: int = DEFAULT_LOGGER_BURST,
        window: float = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.monotonic,
        emit: Callable[[logging.LogRecord], object] | None = None,
    ) -> None:
        super().__init__()
        if burst < 1 or logger_burst < burst or window <= 0:
            raise ValueError("need 1 <= burst <= logger_burst and window > 0")
        self.burst = burst
        self.logger_burst = logger_burst
        self.window = window
        self._clock = clock
        self.emit = emit
        self._lock = threading.Lock()
        self._window_start = clock()
        self._kinds: dict[tuple[str, int, str], _Count] = {}
        self._loggers: dict[str, _Count] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, _SUMMARY_ATTR, False):
            return True
        with self._lock:
            summaries = self._roll(self._clock())
            allowed = self._count(record)
        # Emitted outside the lock: the handler calls this filter again for each summary.
        self._emit(summaries)
        return allowed

    def flush(self) -> None:
        """Emit the summaries of the current window now (at exit: nothing comes later)."""
        with self._lock:
            summaries = self._roll(None)
        self._emit(summaries)

    def _count(self, record: logging.LogRecord) -> bool:
        per_logger = self._loggers.setdefault(record.name, _Count())
        if per_logger.passed >= self.logger_burst:
            # Kinds are tracked only while the logger is under its budget, so a logger
            # whose every message differs cannot grow the table either.
            per_logger.suppressed += 1
            per_logger.levelno = max(per_logger.levelno, record.levelno)
            return False
        kind = self._kinds.setdefault((record.name, record.levelno, _kind(record)), _Count())
        if kind.passed >= self.burst:
            kind.suppressed += 1
            kind.levelno = record.levelno
            return False
        kind.passed += 1
        per_logger.passed += 1
        return True

    def _roll(self, now: float | None) -> list[logging.LogRecord]:
        """End the window if it is over (``now`` None: end it regardless)."""
        if now is not None and now - self._window_start < self.window:
            return []
        summaries = [
            self._summary(name, count.levelno, count.suppressed, similar_to)
            for (name, _level, similar_to), count in self._kinds.items()
            if count.suppressed
        ]
        summaries += [
            self._summary(name, count.levelno, count.suppressed, None)
            for name, count in self._loggers.items()
            if count.suppressed
        ]
        self._kinds.clear()
        self._loggers.clear()
        self._window_start = self._clock() if now is None else now
        return summaries

    def _summary(
        self, name: str, levelno: int, suppressed: int, similar_to: str | None
    ) -> logging.LogRecord:
        what = f"similar lines: {similar_to}" if similar_to is not None else "more lines"
        record = logging.LogRecord(
            name, levelno, __file__, 0, f"suppressed {suppressed} {what}", None, None
        )
        record.suppressed = suppressed
        record.similar_to = similar_to
        record.window_s = self.window
        setattr(record, _SUMMARY_ATTR, True)
        return record

    def _emit(self, summaries: list[logging.LogRecord]) -> None:
        if self.emit is not None:
            for record in summaries:
                # In an empty context: the summary belongs to no request being served.
                contextvars.Context().run(self.emit, record)


# The filter of the handler ``configure_logging`` installed last (its summaries flush at exit).
_installed: RateLimitFilter | None = None


def configure_logging(
    service: str,
    level: str = "INFO",
    *,
    json_format: bool = True,
    rate_limit: RateLimitFilter | None = None,
) -> None:
    """Route the root logger to stderr, JSON by default (plain text for local demos).

    Records pass ``rate_limit`` (by default a ``RateLimitFilter`` with its defaults).
    """
    handler = logging.StreamHandler(sys.stderr)
    if json_format:
        handler.setFormatter(JsonFormatter(service))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    limiter = rate_limit if rate_limit is not None else RateLimitFilter()
    limiter.emit = handler.handle
    handler.addFilter(limiter)
    global _installed
    if _installed is not None:
        atexit.unregister(_installed.flush)
    _installed = limiter
    # Registered after logging's own exit hook, so it runs first (with the handler open).
    atexit.register(limiter.flush)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log duplicates the middleware's request log.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
