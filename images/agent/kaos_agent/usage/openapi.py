"""``GET /v1/usage`` in the agent's OpenAPI document (``kaos_agent.openapi``)."""

from __future__ import annotations

from kaos_core.openapi import Operation, Query
from pydantic import BaseModel, Field

from kaos_agent.records.openapi import read_operation
from kaos_agent.records.query import DATE
from kaos_agent.usage.http import ROUTE

DAY = {"type": "string", "format": "date", "pattern": f"^{DATE.pattern}$"}


class UsageItem(BaseModel):
    """One agent's tokens for one user on one UTC day."""

    agent: str
    user: str = Field(description='The principal; callers without one are "anonymous".')
    day: str = Field(description="The UTC day, YYYY-MM-DD.")
    inputTokens: int
    outputTokens: int
    totalTokens: int
    runs: int


class UsageList(BaseModel):
    items: list[UsageItem]


def usage_operations() -> list[Operation]:
    return [
        read_operation(
            ROUTE,
            "agentUsage",
            "Tokens this agent's runs used, per user and UTC day",
            "From the usage ledger beside the task store (shared by the replicas that share"
            " it), by day then user, at most 10000 rows. Under verified user identity the"
            " caller's token is needed; with `AGENT_RBAC` RBAC must allow `get` on"
            " `agents/usage` of this Agent, without it a user reads only their own rows.",
            ("The rows.", UsageList),
            invalid="`invalid_query`: an unknown parameter, a malformed day, `since` after"
            " `until`, a malformed user.",
            forbidden="`agent_not_granted` (RBAC does not allow `get agents/usage`),"
            " `usage_not_granted` (another user's rows, without RBAC).",
            query=[
                Query("since", "First day, included (default: 29 days before `until`).", DAY),
                Query("until", "Last day, included (default: today, UTC).", DAY),
                Query("user", "Only this user's rows.", {"type": "string", "maxLength": 256}),
            ],
        )
    ]
