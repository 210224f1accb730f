"""The Agent resource: an LLM agent with tools, peers and memory, run as a Deployment."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator

from kaos_core.crds.approvals import AgentApprovals, approvals_field
from kaos_core.crds.audit import AgentAudit, audit_field
from kaos_core.crds.autoscaling import AgentAutoscaling, Scaler
from kaos_core.crds.budgets import AgentBudgets, budgets_field
from kaos_core.crds.common import (
    AGE,
    DNS_LABEL,
    ENDPOINT,
    LIST_MAX,
    NAME_MAX,
    PHASE,
    TEXT_MAX,
    CommonStatus,
    CRDModel,
    CustomObject,
    KindInfo,
    PrinterColumn,
    Telemetry,
    cel,
    defaulted,
    image_field,
    ref_name,
    replicas_field,
    resources_field,
    telemetry_field,
)
from kaos_core.crds.egress import EGRESS_MAX, EgressRule
from kaos_core.crds.gateway import GatewayRoute, gateway_route_field
from kaos_core.crds.overrides import (
    ContainerOverride,
    PodOverride,
    container_field,
    pod_field,
)
from kaos_core.crds.schedules import Schedules, ScheduleStatus, schedules_field
from kaos_core.crds.storage import QUANTITY, ConnectionSecretRef
from kaos_core.crds.triggers import Triggers, triggers_field

ReadScope = Literal["session", "agent", "user"]
MemoryType = Literal["local", "remote"]
FailureMode = Literal["soft", "strict"]
# Which memory tools the model is offered: both, search_memory only, save_memory only, none.
MemoryTools = Literal["all", "read", "write", "none"]

Name = Annotated[str, Field(min_length=1, max_length=NAME_MAX, pattern=DNS_LABEL)]


class AgentMemory(CRDModel):
    """How the agent remembers: a pod-local window, or a bound MemoryStore."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.type == 'remote' ? has(self.memoryStore) : !has(self.memoryStore)",
                "memory type remote requires memoryStore; type local forbids it",
            ),
            (
                "!has(self.maxReadScope) || self.maxReadScope == 'session'"
                " || has(self.memoryStore)",
                "a maxReadScope other than session requires a memoryStore",
            ),
            (
                "!has(self.tools) || self.tools == 'none' || has(self.memoryStore)",
                "memory tools require a memoryStore",
            ),
            (
                "!has(self.writeAfterAnswer) || !self.writeAfterAnswer"
                " || (has(self.memoryStore)"
                " && (!has(self.failureMode) || self.failureMode == 'soft'))",
                "writeAfterAnswer needs a memoryStore and failureMode soft (a strict write must"
                " succeed before the answer leaves)",
            ),
        )
    )

    enabled: bool = Field(default=True, description="Recall before and flush after each run.")
    type: MemoryType = Field(
        default="local",
        description="local: pod-local short-term window; remote: the bound MemoryStore.",
    )
    memory_store: str | None = Field(
        default=None,
        max_length=NAME_MAX,
        pattern=DNS_LABEL,
        description="MemoryStore in this namespace (required for type remote).",
    )
    max_read_scope: ReadScope | None = Field(
        default=None,
        description=(
            "Widest long-term read scope (baseline recall and search_memory cap). Defaults"
            " to agent for remote memory (capped by the store), session for local."
        ),
    )
    tools: MemoryTools = Field(
        default="none",
        description="Memory tools offered to the model: all (search_memory and save_memory),"
        " read (search_memory), write (save_memory) or none. The boolean of earlier versions"
        " is refused by the schema; one already stored reads as all (true) or none (false).",
    )
    failure_mode: FailureMode = Field(
        default="soft", description="strict: a failed memory write fails the turn."
    )
    write_after_answer: bool = Field(
        default=False,
        description="Send a turn's write to the MemoryStore after the answer instead of"
        " before it (failureMode soft): the write's round trip leaves every answer's"
        " latency. The session's next turn on the same pod waits for it; with more than one"
        " replica a next turn on another pod, or a client reading the store right after an"
        " answer, may miss a write still on its way.",
    )

    @field_validator("tools", mode="before")
    @classmethod
    def _legacy_tools(cls, value: object) -> object:
        # Objects stored before tools became a mode carry a boolean.
        if isinstance(value, bool):
            return "all" if value else "none"
        return value


class AgentAutonomous(CRDModel):
    """A goal the agent pursues on its own, every ``intervalSeconds``."""

    goal: str = Field(
        min_length=1,
        max_length=TEXT_MAX,
        description="The message the agent is given on each autonomous run, as if a user "
        "had sent it.",
    )
    interval_seconds: int = Field(
        default=300, ge=1, le=86400, description="Seconds from the end of one run to the next."
    )


class TaskConfig(CRDModel):
    """Budgets of one run; a run that reaches one stops with a final answer saying so
    (finish reason ``length``)."""

    max_tool_calls: int | None = Field(
        default=None, ge=0, le=1000, description="Tool calls one run may make (0: none)."
    )
    max_wall_time_seconds: int | None = Field(
        default=None, ge=1, le=86400, description="Wall time one run may take, in seconds."
    )
    max_tokens: int | None = Field(
        default=None, ge=1, le=10**9, description="Tokens one run may use (input and output)."
    )


class ModelSampling(CRDModel):
    """Sampling sent with every model request; a field left out keeps the model's default."""

    temperature: float | None = Field(
        default=None,
        ge=0,
        le=2,
        description="Sampling temperature; 0 answers the same prompt the same way (a small"
        " model needs it to answer reproducibly).",
    )
    max_tokens: int | None = Field(
        default=None, ge=1, le=1_000_000, description="Tokens one model answer may have."
    )
    top_p: float | None = Field(default=None, ge=0, le=1, description="Nucleus sampling.")
    seed: int | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="Sampling seed, for models that honour one.",
    )


class AgentConfig(CRDModel):
    """What the agent is told and how long it may think."""

    description: str | None = Field(
        default=None,
        max_length=4096,
        description="What the agent does, in a sentence: the description on its A2A agent "
        "card (default: the start of instructions). The model does not see it.",
    )
    instructions: str | None = Field(
        default=None,
        max_length=TEXT_MAX,
        description="The system prompt: who the agent is, how it answers, when to use its "
        "tools and peers. Sent to the model at the start of every run.",
    )
    reasoning_loop_max_steps: int = Field(
        default=5,
        ge=1,
        le=100,
        description="Model calls one run may make (each tool round is one more); a run that "
        "reaches the limit ends with a final answer saying so.",
    )
    memory: AgentMemory = defaulted(AgentMemory)
    task_config: TaskConfig | None = Field(
        default=None, description="Per-run budgets: tool calls and wall time."
    )
    model_settings: ModelSampling | None = Field(
        default=None,
        description="Sampling of the agent's model requests: temperature, maxTokens, topP, seed.",
    )
    autonomous: AgentAutonomous | None = Field(
        default=None,
        description="A goal the agent pursues on its own, on a timer (no user message).",
    )


TaskStoreType = Literal["memory", "local", "external"]


class AgentTaskStore(CRDModel):
    """Where the agent keeps its A2A tasks: what ``tasks/get``, ``tasks/list`` and
    ``tasks/cancel`` answer from, and what outlives a pod."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.type == 'external' ? has(self.connectionSecret)"
                " : !has(self.connectionSecret)",
                "an external task store requires connectionSecret; memory and local take none",
            ),
            (
                "self.type == 'external' || !has(self.egress) || size(self.egress) == 0",
                "egress is the external task store's database: memory and local take none",
            ),
        )
    )

    type: TaskStoreType = Field(
        default="memory",
        description="memory: in the pod, lost with it (one replica sees its own tasks only);"
        " local: SQLite on a PersistentVolumeClaim (one replica); external: PostgreSQL,"
        " shared by every replica.",
    )
    size: str = Field(
        default="256Mi",
        max_length=32,
        pattern=QUANTITY,
        description="local: size of the PersistentVolumeClaim holding the tasks.",
    )
    storage_class_name: str | None = Field(
        default=None,
        max_length=253,
        description="local: StorageClass of the claim; unset takes the cluster's default class.",
    )
    connection_secret: ConnectionSecretRef | None = Field(
        default=None,
        description="external (required): the Secret key holding the PostgreSQL connection "
        "string (DSN). Replicas share the tasks through it.",
    )
    egress: list[EgressRule] = Field(
        default_factory=list,
        max_length=EGRESS_MAX,
        description="external, with the operator's security on: the database's address"
        " blocks (and ports) the agent's NetworkPolicy lets its pods connect to.",
    )
    retention_seconds: int = Field(
        default=86400,
        ge=60,
        le=90 * 86400,
        description="How long a finished task (completed, failed, canceled) stays readable"
        " before it is deleted.",
    )


class AgentNetwork(CRDModel):
    """Agent-to-agent delegation."""

    expose: bool = Field(default=True, description="Other agents may delegate to this one.")
    access: list[Name] = Field(
        default_factory=list,
        max_length=LIST_MAX,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description="Agents (in this namespace) this agent may delegate to.",
    )


class AgentSpec(CRDModel):
    """Desired state of an Agent."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.taskStore) || self.taskStore.type != 'local' || self.replicas <= 1",
                "a local task store is one SQLite file on one volume, so the Agent runs"
                " exactly one replica; use an external (PostgreSQL) task store for more",
            ),
            (
                "!has(self.autoscaling) || !has(self.taskStore) || self.taskStore.type != 'local'",
                "autoscaling needs more than one replica, and a local task store is one SQLite"
                " file on one volume (one replica); use an external (PostgreSQL) task store",
            ),
        )
    )

    model_api: str = ref_name("ModelAPI that serves this agent's model.", alias="modelAPI")
    model: str | None = Field(
        default=None,
        max_length=253,
        description="Model name; defaults to the ModelAPI's first model.",
    )
    mcp_servers: list[Name] = Field(
        default_factory=list,
        max_length=LIST_MAX,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description="MCPServers (in this namespace) whose tools the agent may call.",
    )
    agent_network: AgentNetwork = defaulted(AgentNetwork)
    config: AgentConfig = defaulted(AgentConfig)
    wait_for_dependencies: bool = Field(
        default=True,
        description=(
            "Hold a new Agent in Waiting until its ModelAPI, MCP servers and store are Ready."
        ),
    )
    replicas: int = replicas_field()
    autoscaling: AgentAutoscaling | None = Field(
        default=None,
        description="Replicas follow the load: a KEDA ScaledObject on the agent's runs in"
        " flight and queued tasks when the cluster has KEDA, else a HorizontalPodAutoscaler"
        " on CPU. The scaler then owns the Deployment's replicas; spec.replicas is only"
        " where it starts.",
    )
    task_store: AgentTaskStore | None = Field(
        default=None,
        description="Where A2A tasks are kept (default: in the pod's memory). An external"
        " store lets every replica answer for every task and a run outlive its pod.",
    )
    schedules: Schedules = schedules_field()
    triggers: Triggers = triggers_field()
    audit: AgentAudit | None = audit_field()
    budgets: AgentBudgets | None = budgets_field()
    approvals: AgentApprovals | None = approvals_field()
    image: str | None = image_field("the chart's kaos-agent image")
    resources: dict[str, Any] | None = resources_field()
    telemetry: Telemetry | None = telemetry_field()
    container: ContainerOverride | None = container_field()
    pod: PodOverride | None = pod_field()
    gateway_route: GatewayRoute | None = gateway_route_field()


class AgentStatus(CommonStatus):
    """Observed state of an Agent."""

    replicas: int | None = Field(default=None, description="Pods the Deployment asks for.")
    ready_replicas: int | None = Field(
        default=None, description="Pods ready to serve (passing their readiness probe)."
    )
    scaler: Scaler | None = Field(
        default=None,
        description="What scales the Agent: keda (a ScaledObject), hpa (a"
        " HorizontalPodAutoscaler on CPU) or none (spec.replicas, no autoscaling).",
    )
    schedules: list[ScheduleStatus] = Field(
        default_factory=list,
        description="Each schedule's last run and its result, from its CronJob and Job.",
    )


class Agent(CustomObject):
    kind: str = "Agent"
    spec: AgentSpec
    status: AgentStatus = Field(default_factory=AgentStatus)

    info: ClassVar[KindInfo] = KindInfo(
        kind="Agent",
        plural="agents",
        singular="agent",
        short_names=("kagent",),
        description="An LLM agent with tools, peers and memory, run as a Deployment and Service.",
        spec=AgentSpec,
        status=AgentStatus,
        printer_columns=(
            PrinterColumn("ModelAPI", ".spec.modelAPI"),
            PrinterColumn("Memory", ".spec.config.memory.type"),
            PrinterColumn(
                "Tasks",
                ".spec.taskStore.type",
                description="Where A2A tasks are kept (empty: memory).",
            ),
            PHASE,
            ENDPOINT,
            AGE,
        ),
    )
