"""The window of an audit-trail query (``--since``/``--until``) as the agent takes it.

A relative time (``90s``, ``30m``, ``12h``, ``7d``: that long ago) is turned into epoch
seconds here; anything else (epoch seconds, a date, an RFC 3339 time) goes to the agent as
it is, which refuses what it cannot read (400 ``invalid_query``). The trail itself is read
through ``kaos_cli.clients.agent_ops``.
"""

from __future__ import annotations

import re
import time

_RELATIVE = re.compile(r"([0-9]{1,6})([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def when(value: str, *, now: float | None = None) -> str:
    """A ``--since``/``--until`` value as the agent takes it."""
    relative = _RELATIVE.fullmatch(value.strip())
    if relative is None:
        return value.strip()
    ago = int(relative[1]) * _UNIT_SECONDS[relative[2]]
    return f"{(time.time() if now is None else now) - ago:.3f}"
