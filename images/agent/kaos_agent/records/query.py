"""The query string of a record set's read endpoint: its parameters, each at most once,
and the days and times they take. Anything else is a 400 ``invalid_query`` naming the
parameter: nothing is read.

A day is ``YYYY-MM-DD``; a time is epoch seconds, a UTC date (its midnight) or an
RFC 3339 time with its offset (``2026-12-06T09:30:00Z``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping, Sequence

from kaos_core.errors import BadRequest

_NUMBER = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?")
DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_DATE_TIME = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
# What a time takes, for the OpenAPI document.
TIME_PATTERN = f"^({_NUMBER.pattern}|{DATE.pattern}|{_DATE_TIME.pattern})$"


class InvalidQuery(BadRequest):
    code = "invalid_query"


def check_parameters(given: Mapping[str, Sequence[str]], known: Iterable[str]) -> None:
    """Refuse a parameter that is not ``known`` or given more than once; ``given``: every
    value of each parameter."""
    known = tuple(known)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise InvalidQuery(
            f"unknown query parameter {unknown[0][:64]!r}; known: {', '.join(known)}"
        )
    for name in known:
        if len(given.get(name, ())) > 1:
            raise InvalidQuery(f"query parameter {name!r} given more than once")


def _date(raw: str) -> dt.date | None:
    if DATE.fullmatch(raw):
        with contextlib.suppress(ValueError):
            return dt.date.fromisoformat(raw)
    return None


def parse_day(name: str, raw: str) -> str:
    """The ``YYYY-MM-DD`` day of ``raw``."""
    day = _date(raw)
    if day is None:
        raise InvalidQuery(f"{name} must be a date, YYYY-MM-DD")
    return day.isoformat()


def parse_time(name: str, raw: str | None) -> float | None:
    """Epoch seconds of a time; ``None`` when absent."""
    if raw is None:
        return None
    stamp = math.nan
    day = _date(raw)
    if _NUMBER.fullmatch(raw):
        stamp = float(raw)
    elif day is not None:
        stamp = dt.datetime.combine(day, dt.time(), dt.UTC).timestamp()
    elif _DATE_TIME.fullmatch(raw):
        with contextlib.suppress(ValueError, OverflowError):
            stamp = dt.datetime.fromisoformat(raw.upper().replace("Z", "+00:00")).timestamp()
    if not math.isfinite(stamp):
        raise InvalidQuery(
            f"'{name}' must be epoch seconds, a date (YYYY-MM-DD) or an RFC 3339 time"
        )
    return stamp
