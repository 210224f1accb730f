"""Condition types, reasons and phases of every KAOS resource, in one place.

Reasons are CamelCase as the Kubernetes API conventions ask; the operator, the CLI and
the tests refer to these constants rather than to string literals.
"""

from __future__ import annotations

from typing import Final

# Condition types.
READY: Final = "Ready"
DEPENDENCIES_READY: Final = "DependenciesReady"
MEMORY_DEGRADED: Final = "MemoryDegraded"
# Whether every replica of an Agent answers for every A2A task (its taskStore).
TASKS_SHARED: Final = "TasksShared"
# Whether an Agent's replicas follow its load (spec.autoscaling); the message names the scaler.
AUTOSCALED: Final = "Autoscaled"

# Phases (``status.phase``), a one-word summary for printer columns.
PHASE_PENDING: Final = "Pending"
PHASE_WAITING: Final = "Waiting"
PHASE_READY: Final = "Ready"
PHASE_FAILED: Final = "Failed"

# Reasons.
AVAILABLE: Final = "Available"
DEPLOYMENT_PROGRESSING: Final = "DeploymentProgressing"
DEPENDENCIES_AVAILABLE: Final = "DependenciesAvailable"
WAITING_FOR_DEPENDENCIES: Final = "WaitingForDependencies"
# Why a resource's Deployment is not available, read from its pods, claims and the
# claims' Events while it is not (kaos_operator.workload). The first two need someone to
# change something: the phase is Failed. The others may resolve by themselves (a
# provisioner, a new node, a Secret created after the resource): the phase stays Pending.
IMAGE_PULL_FAILED: Final = "ImagePullFailed"
CRASH_LOOPING: Final = "CrashLooping"
CLAIM_PENDING: Final = "ClaimPending"
UNSCHEDULABLE: Final = "Unschedulable"
CONTAINER_CONFIG_ERROR: Final = "ContainerConfigError"
POD_CREATION_FAILED: Final = "PodCreationFailed"
MODEL_API_NOT_FOUND: Final = "ModelAPINotFound"
MODEL_API_NOT_READY: Final = "ModelAPINotReady"
MCP_SERVER_NOT_FOUND: Final = "MCPServerNotFound"
MCP_SERVER_NOT_READY: Final = "MCPServerNotReady"
MEMORY_STORE_NOT_FOUND: Final = "MemoryStoreNotFound"
MEMORY_STORE_NOT_READY: Final = "MemoryStoreNotReady"
MEMORY_STORE_READY: Final = "MemoryStoreReady"
MEMORY_NOT_REMOTE: Final = "MemoryNotRemote"
USER_SCOPE_NEEDS_USER_IDENTITY: Final = "UserScopeNeedsUserIdentity"
READ_SCOPE_ABOVE_CEILING: Final = "ReadScopeAboveCeiling"
NAME_CONFLICT: Final = "NameConflict"
APPLY_FAILED: Final = "ApplyFailed"
# The object does not match the operator's model of its kind (the message names the field).
INVALID_SPEC: Final = "InvalidSpec"
# TasksShared: an external task store, one replica, or replicas each with their own tasks.
EXTERNAL_TASK_STORE: Final = "ExternalTaskStore"
SINGLE_REPLICA: Final = "SingleReplica"
TASKS_IN_POD_MEMORY: Final = "TasksInPodMemory"
# The resource's container/pod overrides would change what the operator sets.
OVERRIDE_REFUSED: Final = "OverrideRefused"
# A Hosted ModelAPI's model: pulled into the pod on first start (condition ModelPulled).
MODEL_PULLED: Final = "ModelPulled"
PULLED: Final = "Pulled"
PULLING: Final = "Pulling"
# Gateway API: the resource's HTTPRoute (condition Routed).
ROUTED: Final = "Routed"
ROUTE_APPLIED: Final = "RouteApplied"
GATEWAY_API_DISABLED: Final = "GatewayAPIDisabled"
# MCPServer: the runtime named in spec.runtime is not in the operator's registry.
RUNTIME_NOT_FOUND: Final = "RuntimeNotFound"
# MCPServer: status.availableTools read over MCP (condition ToolsListed).
TOOLS_LISTED: Final = "ToolsListed"
TOOLS_READ: Final = "ToolsRead"
TOOL_LIST_FAILED: Final = "ToolListFailed"
TOOLS_LISTING: Final = "ToolsListing"
# ModelAPI: status.modelCapabilities read from the backend once its Deployment is
# available (condition CapabilitiesRead): Ollama's /api/show, LiteLLM's /model/info.
CAPABILITIES_READ: Final = "CapabilitiesRead"
CAPABILITIES_REPORTED: Final = "CapabilitiesReported"
CAPABILITY_READ_FAILED: Final = "CapabilityReadFailed"
CAPABILITIES_READING: Final = "CapabilitiesReading"
WAITING_FOR_DEPLOYMENT: Final = "WaitingForDeployment"
# Agent: whether its model can call the tools it is offered (condition ToolsSupported),
# from the ModelAPI's status.modelCapabilities; absent while unknown or without tools.
TOOLS_SUPPORTED: Final = "ToolsSupported"
MODEL_CALLS_TOOLS: Final = "ModelCallsTools"
MODEL_CANNOT_CALL_TOOLS: Final = "ModelCannotCallTools"
# Autoscaled: KEDA's ScaledObject on the agent's load, a HorizontalPodAutoscaler on CPU
# (the cluster serves no ScaledObjects), or no autoscaling asked for.
KEDA_SCALED_OBJECT: Final = "KEDAScaledObject"
HORIZONTAL_POD_AUTOSCALER: Final = "HorizontalPodAutoscaler"
AUTOSCALING_OFF: Final = "AutoscalingOff"
