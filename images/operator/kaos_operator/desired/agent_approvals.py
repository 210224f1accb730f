"""An Agent's approval gates in its pods: ``spec.approvals`` as ``AGENT_APPROVALS`` (JSON),
absent when the Agent has none (then no call waits)."""

from __future__ import annotations

import json

from kaos_core import agent_env as names
from kaos_core.crds import Agent


def approvals_env(agent: Agent) -> dict[str, str]:
    approvals = agent.spec.approvals
    if approvals is None:
        return {}
    return {names.AGENT_APPROVALS: json.dumps(approvals.to_wire(), separators=(",", ":"))}
