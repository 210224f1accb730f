"""An Agent's audit trail in its pods: ``spec.audit`` as ``AGENT_AUDIT_RETENTION_DAYS`` and
``AGENT_AUDIT_RECORD_ARGUMENTS``, absent when the Agent has no ``audit`` (then the
runtime's defaults apply, which are the field's: 30 days, digests only)."""

from __future__ import annotations

from kaos_core import agent_env as names
from kaos_core.crds import Agent

from kaos_operator.desired.common import bool_env


def audit_env(agent: Agent) -> dict[str, str]:
    audit = agent.spec.audit
    if audit is None:
        return {}
    return {
        names.AGENT_AUDIT_RETENTION_DAYS: str(audit.retention_days),
        names.AGENT_AUDIT_RECORD_ARGUMENTS: bool_env(audit.record_arguments),
    }
