"""The query of ``GET /v1/audit``: ``task``, ``since``, ``until`` and ``limit``, each at most
once; anything else, or a value that does not parse, is a 400 ``invalid_query`` naming
the parameter.

``since`` and ``until`` are times (``kaos_agent.records.query``: epoch seconds, a UTC date
or an RFC 3339 time with its offset). ``since`` is inclusive, ``until`` exclusive.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kaos_agent.audit.log import DEFAULT_LIMIT, MAX_QUERY_LIMIT, AuditQuery
from kaos_agent.records.query import InvalidQuery, check_parameters, parse_time

__all__ = ["DEFAULT_LIMIT", "AuditQuery", "BadAuditQuery", "parse_query"]

MAX_TASK_CHARS = 256
PARAMETERS = ("task", "since", "until", "limit")
_LIMIT = re.compile(r"[0-9]{1,6}")

# The audit's name for the error every record set's query raises.
BadAuditQuery = InvalidQuery


def parse_query(query: Mapping[str, str], getall: Mapping[str, list[str]]) -> AuditQuery:
    """``query``: each parameter's value; ``getall``: every value given for each. The
    query of any user's entries (the handler narrows it to whose the caller may read)."""
    check_parameters(getall, PARAMETERS)
    task = query.get("task")
    if task is not None and not 0 < len(task) <= MAX_TASK_CHARS:
        raise InvalidQuery(f"'task' must be 1 to {MAX_TASK_CHARS} characters")
    since, until = parse_time("since", query.get("since")), parse_time("until", query.get("until"))
    if since is not None and until is not None and until <= since:
        raise InvalidQuery("'until' must be after 'since'")
    return AuditQuery(task=task, since=since, until=until, limit=parse_limit(query.get("limit")))


def parse_limit(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_LIMIT
    if not _LIMIT.fullmatch(raw) or not 1 <= int(raw) <= MAX_QUERY_LIMIT:
        raise InvalidQuery(f"'limit' must be an integer from 1 to {MAX_QUERY_LIMIT}")
    return int(raw)
