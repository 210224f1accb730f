"""Custom resources of the ``kaos.tools`` API group as pydantic models.

The models are the single source of the CRD schemas (``kaos_core.crds.generate`` turns
them into the YAML under ``charts/kaos/crds``) and the typed view the operator and the
CLI read custom objects through, so the schema the API server enforces and the code that
reads the objects cannot drift apart.
"""

from kaos_core.crds.agent import Agent, AgentSpec, AgentStatus
from kaos_core.crds.common import (
    GROUP,
    VERSION,
    Condition,
    CustomObject,
    SecretKeyRef,
    Telemetry,
)
from kaos_core.crds.mcpserver import MCPServer, MCPServerSpec, MCPServerStatus
from kaos_core.crds.memorystore import MemoryStore, MemoryStoreSpec, MemoryStoreStatus
from kaos_core.crds.modelapi import ModelAPI, ModelAPISpec, ModelAPIStatus

API_VERSION = f"{GROUP}/{VERSION}"

__all__ = [
    "API_VERSION",
    "GROUP",
    "VERSION",
    "Agent",
    "AgentSpec",
    "AgentStatus",
    "Condition",
    "CustomObject",
    "MCPServer",
    "MCPServerSpec",
    "MCPServerStatus",
    "MemoryStore",
    "MemoryStoreSpec",
    "MemoryStoreStatus",
    "ModelAPI",
    "ModelAPISpec",
    "ModelAPIStatus",
    "SecretKeyRef",
    "Telemetry",
]
