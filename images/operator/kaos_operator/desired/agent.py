"""An Agent's desired Deployment and Service, and the environment its runtime reads
(where its tasks are kept and how its pods are replaced: ``agent_tasks``).

The read-scope rules live here too, as pure functions, because they decide both the
environment and whether the operator refuses the binding: an agent never reads wider
than its store's ceiling, and a ``user`` scope needs a secured user-identity posture.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaos_core import agent_env as names
from kaos_core.crds import reasons
from kaos_core.crds.agent import Agent, AgentMemory, ModelSampling, ReadScope
from kaos_core.crds.common import Telemetry
from kaos_core.endpoints import format_endpoints
from kaos_core.memory.contract import scope_rank
from kaos_core.wire import agent_identity

from kaos_operator.desired import (
    agent_approvals,
    agent_audit,
    agent_budgets,
    agent_scaling,
    agent_schedules,
    agent_tasks,
    agent_triggers,
    egress,
    security,
)
from kaos_operator.desired.common import (
    AGENT_PORT,
    NONROOT_UID,
    Endpoint,
    Obj,
    bool_env,
    container,
    deployment,
    env_list,
    http_probe,
    pre_stop_sleep,
    restricted_security_context,
    service,
    service_url,
)
from kaos_operator.desired.gateway import route_objects
from kaos_operator.desired.overrides import TELEMETRY_PREFIX, reserved_prefixes, with_overrides
from kaos_operator.desired.telemetry import telemetry_env
from kaos_operator.settings import GatewayRef, Images, Posture

# Runtime tunables the operator never sets, which a platform may set with container.env.
AGENT_TUNABLES = frozenset(
    {
        names.MODEL_API_KEY,
        names.MODEL_TIMEOUT_SECONDS,
        names.MAX_DELEGATION_DEPTH,
        names.DELEGATION_TIMEOUT_SECONDS,
        names.MEMORY_TOKEN_BUDGET,
        names.MEMORY_TOP_K,
        names.MEMORY_TIMEOUT_SECONDS,
        names.AUTONOMOUS_MAX_STEPS,
        names.AUTONOMOUS_TIMEOUT_SECONDS,
    }
)
# Every other name the runtime reads is the operator's, set today or not (deny by
# default: a name added to kaos_core.agent_env is reserved until listed above), and so is
# every AGENT_* (identity, tokens, verification) and OTEL_* variable.
RESERVED_ENV = reserved_prefixes(
    "AGENT_",
    TELEMETRY_PREFIX,
    names=frozenset(
        value
        for key, value in vars(names).items()
        if key.isupper() and isinstance(value, str) and not value.startswith("X-")
    )
    - AGENT_TUNABLES,
)


@dataclass(frozen=True)
class AgentContext:
    """What an Agent's objects depend on beyond its own spec, resolved by the reconciler."""

    images: Images
    posture: Posture
    model_api_url: str
    model_name: str
    mcp_servers: tuple[Endpoint, ...] = ()
    sub_agents: tuple[Endpoint, ...] = ()
    memory_endpoint: str | None = None
    store_ceiling: ReadScope | None = None
    # Listening address and public URL; the defaults are the pod's, a local stack overrides.
    listen_host: str = "0.0.0.0"
    listen_port: int = AGENT_PORT
    public_url: str | None = None
    # With security on: the Agents allowed to call this one (``security.callers_of_agent``).
    callers: tuple[str, ...] = ()
    # The chart's tracing default; the resource's spec.telemetry overrides it field by field.
    telemetry: Telemetry = field(default_factory=Telemetry)
    # Gateway API on: the Gateway spec.gatewayRoute attaches to.
    gateway: GatewayRef | None = None
    # The model cannot call tools (its ModelAPI's capabilities say so): the runtime starts
    # without any (MODEL_TOOLS=off).
    tools_off: bool = False
    # Where a local task store keeps its file: the claim's mount in a pod.
    tasks_dir: str = agent_tasks.TASKS_DIR
    # The cluster serves KEDA's ScaledObjects: spec.autoscaling makes one, else an HPA.
    keda_served: bool = False
    # The scaler moved the live Deployment's replicas from the start: the operator leaves them.
    scaler_holds_replicas: bool = False


@dataclass(frozen=True)
class Refusal:
    """Why the operator will not run an Agent as specified."""

    reason: str
    message: str


def agent_endpoint(namespace: str, name: str) -> str:
    return service_url(name, namespace, AGENT_PORT)


def memory_mode(memory: AgentMemory) -> str:
    """``none`` | ``local`` | ``remote``, as the runtime's MEMORY_TYPE."""
    if not memory.enabled:
        return "none"
    return memory.type


def effective_read_scope(memory: AgentMemory, store_ceiling: ReadScope | None) -> ReadScope:
    """The agent's maximum read scope once defaults are applied.

    Local (or disabled) memory only ever reads its session. Remote memory defaults to
    ``agent``, lowered to the store's ceiling when that is narrower; an explicit scope is
    kept as written (``agent_refusal`` rejects one above the ceiling).
    """
    if memory_mode(memory) != "remote":
        return "session"
    if memory.max_read_scope is not None:
        return memory.max_read_scope
    if store_ceiling is not None and scope_rank(store_ceiling) < scope_rank("agent"):
        return store_ceiling
    return "agent"


def agent_refusal(
    agent: Agent, posture: Posture, store_ceiling: ReadScope | None
) -> Refusal | None:
    """The binding rule the schema cannot check (it needs the posture or the store)."""
    memory = agent.spec.config.memory
    scope = effective_read_scope(memory, store_ceiling)
    if scope == "user" and not posture.user_identity:
        return Refusal(
            reasons.USER_SCOPE_NEEDS_USER_IDENTITY,
            "maxReadScope user needs a secured user-identity posture "
            "(security enabled and a user issuer configured in the operator)",
        )
    if store_ceiling is not None and scope_rank(scope) > scope_rank(store_ceiling):
        return Refusal(
            reasons.READ_SCOPE_ABOVE_CEILING,
            f"maxReadScope {scope} exceeds the ceiling {store_ceiling} of MemoryStore "
            f"{memory.memory_store}",
        )
    return None


def sampling_env(sampling: ModelSampling | None) -> dict[str, str]:
    """The runtime's sampling variables, only for the fields the Agent sets."""
    if sampling is None:
        return {}
    values = {
        names.MODEL_TEMPERATURE: sampling.temperature,
        names.MODEL_MAX_TOKENS: sampling.max_tokens,
        names.MODEL_TOP_P: sampling.top_p,
        names.MODEL_SEED: sampling.seed,
    }
    return {name: str(value) for name, value in values.items() if value is not None}


def agent_env(agent: Agent, ctx: AgentContext) -> dict[str, str]:
    """The agent runtime's environment (names from ``kaos_core.agent_env``)."""
    spec = agent.spec
    cfg = spec.config
    memory = cfg.memory
    mode = memory_mode(memory)
    env: dict[str, str] = {
        names.AGENT_NAME: agent.name,
        names.AGENT_IDENTITY: agent_identity(agent.namespace, agent.name),
        names.AGENT_HOST: ctx.listen_host,
        names.AGENT_PORT: str(ctx.listen_port),
        names.AGENT_PUBLIC_URL: ctx.public_url or agent_endpoint(agent.namespace, agent.name),
        names.AGENT_A2A_ENABLED: bool_env(spec.agent_network.expose),
    }
    if cfg.description:
        env[names.AGENT_DESCRIPTION] = cfg.description
    if cfg.instructions:
        env[names.AGENT_INSTRUCTIONS] = cfg.instructions
    env[names.MODEL_API_URL] = ctx.model_api_url
    env[names.MODEL_NAME] = ctx.model_name
    env[names.REASONING_LOOP_MAX_STEPS] = str(cfg.reasoning_loop_max_steps)
    if ctx.tools_off:
        env[names.MODEL_TOOLS] = "off"
    env.update(sampling_env(cfg.model_settings))
    if cfg.task_config is not None:
        if cfg.task_config.max_tool_calls is not None:
            env[names.TASK_MAX_TOOL_CALLS] = str(cfg.task_config.max_tool_calls)
        if cfg.task_config.max_wall_time_seconds is not None:
            env[names.TASK_MAX_WALL_SECONDS] = str(cfg.task_config.max_wall_time_seconds)
    if ctx.mcp_servers:
        env[names.MCP_SERVERS] = format_endpoints(ctx.mcp_servers)
    if ctx.sub_agents:
        env[names.AGENT_SUB_AGENTS] = format_endpoints(ctx.sub_agents)
    env[names.MEMORY_TYPE] = mode
    if mode == "remote":
        if ctx.memory_endpoint is None:
            raise ValueError(f"Agent {agent.name}: remote memory without a store endpoint")
        env[names.MEMORY_ENDPOINT] = ctx.memory_endpoint
    env[names.MEMORY_MAX_READ_SCOPE] = effective_read_scope(memory, ctx.store_ceiling)
    env[names.MEMORY_TOOLS] = memory.tools if mode == "remote" else "none"
    env[names.MEMORY_FAILURE_MODE] = memory.failure_mode
    if memory.write_after_answer and mode == "remote":
        env[names.MEMORY_WRITE_AFTER_ANSWER] = "true"
    # Posture: from the operator only, never from the Agent.
    env[names.MEMORY_REQUIRE_PRINCIPAL] = bool_env(ctx.posture.require_principal)
    env[names.MEMORY_REQUIRE_AGENT_IDENTITY] = bool_env(ctx.posture.require_agent_identity)
    env.update(agent_tasks.task_store_env(agent, ctx.tasks_dir))
    if cfg.autonomous is not None:
        env[names.AUTONOMOUS_GOAL] = cfg.autonomous.goal
        env[names.AUTONOMOUS_INTERVAL_SECONDS] = str(cfg.autonomous.interval_seconds)
    env.update(agent_approvals.approvals_env(agent))
    env.update(agent_audit.audit_env(agent))
    env.update(agent_budgets.budgets_env(agent))
    env.update(telemetry_env(agent, spec.telemetry, ctx.telemetry))
    return env


def agent_deployment(agent: Agent, ctx: AgentContext) -> Obj:
    spec = agent.spec
    secured = ctx.posture.security_enabled
    env = agent_env(agent, ctx)
    # The triggers' secrets are files of the pod (a local stack has no such mount).
    env.update(agent_triggers.triggers_env(agent))
    if secured:
        # Pod paths, so here and not in agent_env (a local stack has no such mounts).
        env.update(security.agent_security_env(ctx.posture))
    tasks_volume = agent_tasks.tasks_volume(agent)
    mounts = [security.token_mount(), security.callers_mount()] if secured else []
    volumes = [security.token_volume(), security.callers_volume(agent.name)] if secured else []
    if tasks_volume is not None:
        mounts.append(agent_tasks.tasks_mount(ctx.tasks_dir))
        volumes.append(tasks_volume)
    triggers_volume = agent_triggers.triggers_volume(agent)
    if triggers_volume is not None:
        mounts.append(agent_triggers.triggers_mount())
        volumes.append(triggers_volume)
    main = container(
        "agent",
        spec.image or ctx.images.agent,
        ctx.images.pull_policy,
        port=AGENT_PORT,
        command=["kaos-agent"],
        env=env_list(env) + agent_tasks.task_store_refs(agent),
        resources=spec.resources,
        readiness=http_probe("/readyz"),
        liveness=http_probe("/healthz"),
        volume_mounts=mounts or None,
        security=restricted_security_context(),
        lifecycle=pre_stop_sleep(),
    )
    pod_security: Obj = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    if tasks_volume is not None:
        # The claim's files writable by the image's user.
        pod_security["fsGroup"] = NONROOT_UID
    dep = deployment(
        agent,
        container=main,
        replicas=spec.replicas,
        volumes=volumes or None,
        strategy=agent_tasks.rollout_strategy(agent),
        pod_security=pod_security,
        service_account=security.agent_service_account(agent.name) if secured else None,
        termination_grace_seconds=agent_tasks.grace_seconds(agent),
    )
    dep = agent_scaling.with_scaling(dep, agent, ctx.scaler_holds_replicas)
    return with_overrides(dep, spec, reserved=RESERVED_ENV)


def desired_agent_objects(agent: Agent, ctx: AgentContext) -> list[Obj]:
    """The Deployment and Service of an Agent, owned by it; the claim of a local task
    store (first: a pod created before its claim is unschedulable until it appears); a
    PodDisruptionBudget with more than one replica; its autoscaler (a KEDA ScaledObject or a
    HorizontalPodAutoscaler) with spec.autoscaling; a CronJob per schedule
    (``agent_schedules``); with security on also its ServiceAccount, callers ConfigMap and
    NetworkPolicy."""
    claim = agent_tasks.tasks_claim(agent)
    objects = [claim] if claim is not None else []
    objects += [agent_deployment(agent, ctx), service(agent, AGENT_PORT)]
    budget = agent_tasks.agent_disruption_budget(agent)
    if budget is not None:
        objects.append(budget)
    objects += agent_scaling.scaler_objects(agent, ctx.keda_served, AGENT_PORT)
    objects += route_objects(agent, AGENT_PORT, agent.spec.gateway_route, ctx.gateway)
    secured = ctx.posture.security_enabled
    objects += agent_schedules.schedule_objects(
        agent,
        image=agent.spec.image or ctx.images.agent,
        pull_policy=ctx.images.pull_policy,
        url=agent_endpoint(agent.namespace, agent.name),
        secured=secured,
        otel=telemetry_env(agent, agent.spec.telemetry, ctx.telemetry),
    )
    if secured:
        policy = security.network_policy(
            agent,
            AGENT_PORT,
            {"Agent": ctx.callers},
            from_anywhere=agent.spec.agent_network.expose,
        )
        objects += [
            security.service_account(agent),
            security.callers_config_map(agent, agent_schedules.self_caller(agent, ctx.callers)),
            egress.with_egress(
                agent_scaling.admit_scaler(
                    agent_schedules.admit_schedule_pods(policy, agent, AGENT_PORT),
                    agent,
                    ctx.keda_served,
                    ctx.posture.keda_namespace,
                    AGENT_PORT,
                ),
                egress.agent_egress(agent, ctx.posture),
            ),
        ]
    return objects
