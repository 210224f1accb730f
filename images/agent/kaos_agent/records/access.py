"""Who may read a record set the agent serves to operators (``GET /v1/audit``,
``GET /v1/usage``):

- no verification at all (development): anyone, every record;
- verified agent identity only: the callers a chat admits, every record;
- verified user identity: the user of a valid token (this agent's audience); with
  ``AGENT_RBAC``, RBAC must allow ``get`` on the record set's subresource of this Agent
  (403 ``agent_not_granted`` otherwise), and then every record is readable; without it,
  only the user's own records.
"""

from __future__ import annotations

from collections.abc import Mapping

from kaos_core.auth.invoke import GET

from kaos_agent.auth import EdgeAuth


async def own_records(
    auth: EdgeAuth | None, headers: Mapping[str, str], subresource: str
) -> str | None:
    """Whose records the caller may read: ``None`` for everyone's, else the principal
    whose only. Raises the edge's 401, 403, 503 or 400."""
    if auth is None:
        return None
    if auth.users is None:
        await auth.check(headers)
        return None
    user = await auth.users.end_user(headers)
    if auth.users.access is None:
        return user.principal
    await auth.users.access.check(user, verb=GET, subresource=subresource)
    return None
