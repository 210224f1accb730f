"""The agent runtime's settings (``kaos_agent.settings.service``) and their groups, a module
each; the MCP runtime's are ``kaos_agent.mcp_runtime.settings``."""

from __future__ import annotations

from kaos_agent.settings.approvals import ApprovalPolicy, ApprovalSettings
from kaos_agent.settings.audit import AuditSettings
from kaos_agent.settings.autonomous import AutonomousMode, AutonomousSettings
from kaos_agent.settings.budgets import TokenBudgets
from kaos_agent.settings.identity import AgentIdentity, AgentServer
from kaos_agent.settings.memory import AgentMemorySettings, MemoryTools, MemoryType
from kaos_agent.settings.model import ModelSettings, ModelTools, Sampling
from kaos_agent.settings.run import DelegationSettings, McpServers, RunBudget, ToolSettings
from kaos_agent.settings.service import GROUPS, AgentSettings
from kaos_agent.settings.tasks import TaskStoreSettings, TaskStoreType
from kaos_agent.settings.triggers import Trigger, TriggerSettings

__all__ = [
    "GROUPS",
    "AgentIdentity",
    "AgentMemorySettings",
    "AgentServer",
    "AgentSettings",
    "ApprovalPolicy",
    "ApprovalSettings",
    "AuditSettings",
    "AutonomousMode",
    "AutonomousSettings",
    "DelegationSettings",
    "McpServers",
    "MemoryTools",
    "MemoryType",
    "ModelSettings",
    "ModelTools",
    "RunBudget",
    "Sampling",
    "TaskStoreSettings",
    "TaskStoreType",
    "TokenBudgets",
    "ToolSettings",
    "Trigger",
    "TriggerSettings",
]
