"""``POST /v1/triggers/{name}`` in the agent's OpenAPI document (``kaos_agent.openapi``):
its signature headers, the JSON payload it takes as it comes, and every refusal
(``kaos_agent.triggers.http``)."""

from __future__ import annotations

from kaos_core import openapi
from kaos_core.openapi import JSON, REQUEST_ID, REQUEST_ID_ECHO, Header, Operation, PathParam, Reply
from pydantic import BaseModel, ConfigDict, Field

from kaos_agent.triggers.http import ROUTE
from kaos_agent.triggers.signature import (
    DELIVERY_HEADERS,
    MAX_SKEW_SECONDS,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
)


class TriggerStarted(BaseModel):
    """A delivery admitted: the A2A task it started (``GetTask`` it as the trigger's owner)."""

    model_config = ConfigDict(populate_by_name=True)

    task_id: str = Field(alias="taskId", description="The started A2A task's id.")


def _delivery(name: str) -> Header:
    return Header(
        name,
        f"The delivery's id (this or {' or '.join(n for n in DELIVERY_HEADERS if n != name)},"
        " once): a delivery with an id seen in the last 10 minutes is a replay.",
        {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"},
    )


def trigger_operation() -> Operation:
    err = openapi.error_reply
    return Operation(
        ROUTE,
        "post",
        "deliverTrigger",
        "A signed webhook delivery: starts one A2A task",
        "The trigger (`spec.triggers`) renders its message from the JSON payload and starts "
        "one A2A task with it; every refusal starts nothing. The signature is GitHub's "
        f"scheme over `<{TIMESTAMP_HEADER}>.<body>` with the trigger's secret.",
        ["triggers"],
        {
            202: Reply(
                "Admitted: the task it started.", {JSON: TriggerStarted}, (REQUEST_ID_ECHO,)
            ),
            400: err(
                "`bad_delivery_id`; `blank_message` (the payload renders no message); the "
                "edge's refusals of a body: `malformed_json`, `invalid_text`, `json_too_deep`."
            ),
            401: err(
                "`invalid_signature`; `stale_timestamp` (more than "
                f"{MAX_SKEW_SECONDS} seconds from the agent's clock)."
            ),
            404: err("`unknown_trigger`: the Agent has no trigger of that name."),
            408: err("`request_timeout`: the body did not arrive in time."),
            409: err("`replayed_delivery`: this delivery id (or signature) was admitted already."),
            413: err("`payload_too_large`: the body exceeds the agent's limit."),
            415: err("`unsupported_encoding`: a `Content-Encoding` was sent."),
            429: err("`rate_limited`: the trigger is at its `maxPerMinute`.", openapi.RETRY_AFTER),
            503: err("`shutting_down`, `task_store_unavailable`: nothing was started."),
        },
        [
            Header(
                SIGNATURE_HEADER,
                "`sha256=<hex HMAC-SHA256 of '<timestamp>.<body>' with the trigger's secret>`.",
                {"type": "string", "pattern": "^sha256=[0-9a-f]{64}$"},
                required=True,
            ),
            Header(
                TIMESTAMP_HEADER,
                "Unix seconds when the delivery was signed.",
                {"type": "string", "pattern": "^[0-9]{1,12}$"},
                required=True,
            ),
            *(_delivery(name) for name in DELIVERY_HEADERS),
            REQUEST_ID,
        ],
        raw_body={JSON: {"description": "The sender's JSON payload, any JSON value."}},
        path_params=[
            PathParam(
                "name",
                "The trigger's name in `spec.triggers`.",
                {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
            )
        ],
        extra_models=(TriggerStarted,),
    )
