"""An Agent's webhook triggers: signed HTTP deliveries that start an A2A task.

Each trigger is served by every replica at ``POST /v1/triggers/<name>``
(``kaos_agent.triggers``); its HMAC secret is a key of a Secret the operator projects
into the pods (never into the environment), and its message is a template over the
delivery's JSON payload (``{{ path.to.field }}``, nothing else interpreted).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from kaos_core.crds.common import (
    DNS_LABEL,
    NAME_MAX,
    CRDModel,
    SecretKeyRef,
    cel,
    unique_names,
    unique_names_rule,
)

TRIGGERS_MAX = 20
MESSAGE_MAX = 8_000
PER_MINUTE_MAX = 10_000


class AgentTrigger(CRDModel):
    """A webhook that starts a task: its name, its secret and the message it sends."""

    name: str = Field(
        min_length=1,
        max_length=NAME_MAX,
        pattern=DNS_LABEL,
        description="The trigger's name, unique in the Agent: POST /v1/triggers/<name>.",
    )
    secret: SecretKeyRef = Field(
        description="The Secret key holding the HMAC-SHA256 secret the sender signs with"
        " (mounted as a file, never put in the environment)."
    )
    message: str = Field(
        min_length=1,
        max_length=MESSAGE_MAX,
        description="The task's message: a template whose {{ path.to.field }} placeholders"
        " take values of the delivery's JSON payload; nothing else is interpreted.",
    )
    max_per_minute: int = Field(
        default=60,
        ge=1,
        le=PER_MINUTE_MAX,
        description="Deliveries accepted per minute across the Agent's replicas; more are"
        " answered 429.",
    )


Triggers = Annotated[list[AgentTrigger], unique_names("trigger")]


def triggers_field() -> Any:
    """``spec.triggers``: at most ``TRIGGERS_MAX``, names unique (CEL)."""
    return Field(
        default_factory=list,
        max_length=TRIGGERS_MAX,
        json_schema_extra=cel(unique_names_rule("trigger")),
        description="Signed webhooks that start an A2A task (at most 20); see the Triggers"
        " page of the documentation for the signature scheme.",
    )
