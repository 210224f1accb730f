"""The operator's settings (``kaos_operator.settings.service``) and their groups, a module
each."""

from __future__ import annotations

from kaos_operator.settings.images import Images, PullPolicy
from kaos_operator.settings.leader import SERVICE_ACCOUNT_NAMESPACE, LeaderSettings, lease_namespace
from kaos_operator.settings.posture import Posture, TokenVerification
from kaos_operator.settings.routing import GatewayRef
from kaos_operator.settings.runtimes import BUILTIN_RUNTIMES, McpRuntime, ParamsMode
from kaos_operator.settings.service import GROUPS, OperatorSettings, ReconcileSettings

__all__ = [
    "BUILTIN_RUNTIMES",
    "GROUPS",
    "SERVICE_ACCOUNT_NAMESPACE",
    "GatewayRef",
    "Images",
    "LeaderSettings",
    "McpRuntime",
    "OperatorSettings",
    "ParamsMode",
    "Posture",
    "PullPolicy",
    "ReconcileSettings",
    "TokenVerification",
    "lease_namespace",
]
