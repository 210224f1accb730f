"""An Agent's audit trail: how long its record of tool calls, delegations and approval
decisions is kept, and whether the calls' arguments are recorded themselves.

Every call is recorded with a digest of its arguments (SHA-256 of their canonical JSON);
the arguments themselves only when the Agent opts in (they may carry personal data).
The agent keeps the trail beside its A2A task store (``kaos_agent.audit``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kaos_core.crds.common import CRDModel

RETENTION_DAYS_DEFAULT = 30
RETENTION_DAYS_MAX = 3650


class AgentAudit(CRDModel):
    """How long the audit trail is kept and what it records of each call."""

    retention_days: int = Field(
        default=RETENTION_DAYS_DEFAULT,
        ge=1,
        le=RETENTION_DAYS_MAX,
        description="Days an entry is kept before it is deleted (1 to 3650).",
    )
    record_arguments: bool = Field(
        default=False,
        description="Record each call's arguments themselves, not only their SHA-256 digest"
        " (arguments may carry personal data: off by default).",
    )


def audit_field() -> Any:
    """``spec.audit``: optional; absent, the defaults apply (30 days, digests only)."""
    return Field(
        default=None,
        description="The audit trail of tool calls, delegations and approval decisions:"
        " retention and whether arguments are recorded (default: 30 days, digests only).",
    )
