"""The audit trail of tool calls, delegations and approval decisions (``kaos_agent.audit``):
how long entries are kept and whether the calls' arguments are recorded themselves.

The operator writes both from the Agent's ``spec.audit`` (its defaults when it is absent).
"""

from __future__ import annotations

from typing import ClassVar

from kaos_core import agent_env as env
from kaos_core.settings import SettingsGroup, setting

DAY_SECONDS = 86400


class AuditSettings(SettingsGroup):
    """What the audit trail keeps, and for how long."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Audit trail"

    retention_days: int = setting(
        "days an entry of the audit trail is kept (1 to 3650); older ones are deleted by a"
        " sweep every hour and at start",
        env=env.AGENT_AUDIT_RETENTION_DAYS,
        default=30,
        ge=1,
        le=3650,
    )
    record_arguments: bool = setting(
        "record each tool call's and delegation's arguments themselves (canonical JSON);"
        " off, only their SHA-256 digest is recorded",
        env=env.AGENT_AUDIT_RECORD_ARGUMENTS,
        default=False,
    )

    @property
    def retention_seconds(self) -> float:
        return float(self.retention_days * DAY_SECONDS)
