"""An Agent's webhook triggers in its pods: the list in ``AGENT_TRIGGERS`` and each
trigger's HMAC secret as a file of one projected volume (``<dir>/<name>``), read-only.

A secret goes into a file, not the environment: the environment is what a crash dump, a
``kubectl describe`` of a careless override or a child process sees. The operator never
reads the Secrets: the kubelet projects them, and a missing one holds the pod in
ContainerCreating, which the Agent's status reports as any unavailable Deployment.
"""

from __future__ import annotations

import json

from kaos_core import agent_env as names
from kaos_core.crds import Agent

from kaos_operator.desired.common import Obj

TRIGGERS_DIR = "/var/run/kaos/triggers"
TRIGGERS_VOLUME = "triggers"
# Readable by the image's user (the pod's files are root's; no group of its own).
SECRET_MODE = 0o444


def triggers_env(agent: Agent) -> dict[str, str]:
    triggers = agent.spec.triggers
    if not triggers:
        return {}
    listed = [
        {"name": t.name, "message": t.message, "maxPerMinute": t.max_per_minute} for t in triggers
    ]
    return {
        names.AGENT_TRIGGERS: json.dumps(listed, separators=(",", ":")),
        names.AGENT_TRIGGER_SECRETS_DIR: TRIGGERS_DIR,
    }


def triggers_volume(agent: Agent) -> Obj | None:
    """Every trigger's secret key, as a file named after the trigger."""
    triggers = agent.spec.triggers
    if not triggers:
        return None
    sources = [
        {"secret": {"name": t.secret.name, "items": [{"key": t.secret.key, "path": t.name}]}}
        for t in triggers
    ]
    return {
        "name": TRIGGERS_VOLUME,
        "projected": {"sources": sources, "defaultMode": SECRET_MODE},
    }


def triggers_mount() -> Obj:
    return {"name": TRIGGERS_VOLUME, "mountPath": TRIGGERS_DIR, "readOnly": True}
