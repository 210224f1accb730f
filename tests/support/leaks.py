"""What no answer of a KAOS service may contain: a Python exception's name or a traceback.

Services answer a fixed message per error code and log the cause under the request id.
``find_leak`` is used by the suite-wide body watcher (``tests/fixtures/leaks.py``), the
raw-socket clients (``tests/support/rawhttp.py``) and the fuzz tests.
"""

from __future__ import annotations

import builtins
import re

# The exceptions a Python service can raise by accident: the built-in ones, those of the
# libraries KAOS uses (drivers, parsers, validation, HTTP) and KAOS's own error classes
# (answers carry their snake_case codes, never the class names).
_NAMED = (
    "OperationalError",
    "IntegrityError",
    "ProgrammingError",
    "InterfaceError",
    "DatabaseError",
    "DataError",
    "ValidationError",
    "JSONDecodeError",
    "ParseError",
    "DecodeError",
    "ClientConnectorError",
    "ClientResponseError",
    "ServerDisconnectedError",
    "HttpProcessingError",
    "BadHttpMessage",
    "CancelledError",
    "ApiException",
    "KaosError",
    "BadRequest",
    "MalformedBody",
    "StorageError",
    "StorageUnavailable",
    "StrictFailure",
)
EXCEPTION_NAMES = frozenset(
    name
    for name, value in vars(builtins).items()
    if isinstance(value, type)
    and issubclass(value, BaseException)
    and name not in ("Exception", "BaseException", "Warning")
) | frozenset(_NAMED)
LEAK_RE = re.compile(
    r"Traceback \(most recent call last\)|\b(?:" + "|".join(sorted(EXCEPTION_NAMES)) + r")\b"
)


def find_leak(body: bytes | str) -> str | None:
    """The first exception name or traceback marker in ``body``, if any."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    found = LEAK_RE.search(text)
    return None if found is None else found.group()
