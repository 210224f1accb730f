"""What ``GET /v1/usage`` is asked: a range of UTC days and, optionally, one user.

``since`` and ``until`` are ``YYYY-MM-DD`` (both included; default the last 30 days to
today, UTC), ``user`` a principal as the ledger names it (``anonymous`` for callers
without one). Anything else, a malformed value or ``since`` after ``until`` is 400
``invalid_query``: nothing is read.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from kaos_core.errors import KaosError
from kaos_core.wire import validate_subject
from multidict import MultiMapping

from kaos_agent.records.query import InvalidQuery, check_parameters, parse_day
from kaos_agent.usage.ledger import utc_day

__all__ = ["InvalidQuery", "UsageQuery", "parse_query"]

DEFAULT_DAYS = 30
PARAMETERS = ("since", "until", "user")


@dataclass(frozen=True)
class UsageQuery:
    since: str
    until: str
    user: str | None = None


def parse_query(params: MultiMapping[str], now: float) -> UsageQuery:
    """The query of ``params`` (a request's query string), days defaulted from ``now``."""
    check_parameters({name: params.getall(name) for name in params}, PARAMETERS)
    until = parse_day("until", params["until"]) if "until" in params else utc_day(now)
    if "since" in params:
        since = parse_day("since", params["since"])
    else:
        start = dt.date.fromisoformat(until) - dt.timedelta(days=DEFAULT_DAYS - 1)
        since = start.isoformat()
    if since > until:
        raise InvalidQuery("since must not be after until")
    user = params.get("user")
    if user is not None:
        try:
            user = validate_subject("user", user)
        except KaosError as exc:
            raise InvalidQuery(exc.message) from None
    return UsageQuery(since=since, until=until, user=user)
