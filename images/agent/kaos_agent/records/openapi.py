"""A record set's read endpoint in the agent's OpenAPI document (``kaos_agent.openapi``):
what every one shares (the user's token, the replies of the edge and of the store beside
the task store), each filling in its own answer, query and refusals."""

from __future__ import annotations

from collections.abc import Sequence

from kaos_core import openapi
from kaos_core.openapi import JSON, REQUEST_ID, REQUEST_ID_ECHO, Header, Operation, Query, Reply
from pydantic import BaseModel

from kaos_agent.records.query import TIME_PATTERN

USER_TOKEN = Header(
    "Authorization", "`Bearer <user token>`, under verified user identity.", {"type": "string"}
)
UNAUTHORIZED = "`missing_user_token`, `invalid_token`: under verified user identity"
# A time of the query (``kaos_agent.records.query.parse_time``).
TIME = {"type": "string", "pattern": TIME_PATTERN, "maxLength": 64}


def read_operation(
    route: str,
    operation_id: str,
    summary: str,
    description: str,
    answer: tuple[str, type[BaseModel]],
    *,
    invalid: str,
    forbidden: str,
    unauthorized: str = UNAUTHORIZED + ".",
    query: Sequence[Query],
) -> Operation:
    """``GET route`` answering ``answer`` (its description, its model); ``invalid``,
    ``forbidden``, ``unauthorized``: what its 400, 403 and 401 mean."""
    err = openapi.error_reply
    what, model = answer
    return Operation(
        route,
        "get",
        operation_id,
        summary,
        description,
        ["operations"],
        {
            200: Reply(what, {JSON: model}, (REQUEST_ID_ECHO,)),
            400: err(invalid),
            401: err(unauthorized),
            403: err(forbidden),
            503: err("`task_store_unavailable`, `auth_unavailable`."),
        },
        [USER_TOKEN, REQUEST_ID],
        query=query,
    )
