"""Agent: resolve ModelAPI, MCP servers, store and peers; hold new Agents until they are
Ready; keep running ones serving (with MemoryDegraded) when their store goes away; start
them without tools (ToolsSupported=False) when their model is known not to call tools;
say whether every replica answers for every task (TasksShared), with a Warning Event
when replicas keep their tasks apart (run as asked: existing Agents do); make the scaler
the cluster offers for spec.autoscaling and say which (status.scaler, Autoscaled); run
spec.schedules as CronJobs and report their last runs (status.schedules)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaos_core import agent_env as names
from kaos_core.crds import Agent, MemoryStore, ModelAPI, reasons
from kaos_core.crds.agent import ReadScope

from kaos_operator.desired import (
    AgentContext,
    Endpoint,
    agent_scaling,
    agent_schedules,
    agent_tasks,
    desired_agent_objects,
    security,
)
from kaos_operator.desired.agent import agent_endpoint, agent_refusal, memory_mode
from kaos_operator.desired.mcpserver import mcp_endpoint
from kaos_operator.desired.memorystore import memory_store_endpoint
from kaos_operator.desired.modelapi import model_api_endpoint
from kaos_operator.kube import CRONJOBS, JOBS, Obj
from kaos_operator.reconcilers.base import Reconciler, is_ready
from kaos_operator.status import StatusBuilder


@dataclass
class Resolution:
    """The Agent's dependencies as the caches see them right now."""

    problems: list[tuple[str, str]] = field(default_factory=list)  # (reason, message)
    model_api_url: str | None = None
    model_name: str | None = None
    mcp: list[Endpoint] = field(default_factory=list)
    peers: list[Endpoint] = field(default_factory=list)
    store_endpoint: str | None = None
    store_ceiling: ReadScope | None = None
    store_problem: tuple[str, str] | None = None
    # The model's capabilities as its ModelAPI reports them; None: unknown.
    model_capabilities: list[str] | None = None
    model_api_found: bool = False


def offered_tools(agent: Agent, found: Resolution) -> list[str]:
    """What tools the agent is offered, in words (empty: none)."""
    memory = agent.spec.config.memory
    offered = []
    if found.mcp:
        offered.append("MCP servers")
    if found.peers:
        offered.append("peer agents")
    if memory_mode(memory) == "remote" and memory.tools != "none":
        offered.append("memory tools")
    return offered


def tools_off(agent: Agent, found: Resolution, previous: dict[str, str]) -> bool:
    """Whether the agent starts without tools: offered some, and its model is known not to
    call tools. A running agent whose ModelAPI vanished keeps what it was started with."""
    if not offered_tools(agent, found):
        return False
    if not found.model_api_found:
        return previous.get(names.MODEL_TOOLS) == "off"
    caps = found.model_capabilities
    return caps is not None and "tools" not in caps


def _live_env(dep: Obj | None) -> dict[str, str]:
    if dep is None:
        return {}
    containers = dep["spec"]["template"]["spec"].get("containers") or [{}]
    return {e["name"]: e.get("value", "") for e in containers[0].get("env") or [] if "name" in e}


# A finished run whose Job still looks unfinished in the cache: looked at again after this.
SCHEDULE_RECHECK_SECONDS = 5.0


class AgentReconciler(Reconciler[Agent]):
    model = Agent

    def resolve(self, agent: Agent) -> Resolution:
        ns, spec, ctx = agent.namespace, agent.spec, self.ctx
        out = Resolution()
        api_raw = ctx.resource("ModelAPI", ns, spec.model_api)
        if api_raw is None:
            out.problems.append(
                (reasons.MODEL_API_NOT_FOUND, f"ModelAPI {spec.model_api} not found")
            )
        else:
            api = ModelAPI.model_validate(api_raw)
            out.model_api_found = True
            out.model_api_url = api.status.endpoint or model_api_endpoint(api)
            served = api.status.models or api.spec.served_models()
            out.model_name = spec.model or (served[0] if served else None)
            if out.model_name is not None:
                out.model_capabilities = api.status.model_capabilities.get(out.model_name)
            if not is_ready(api_raw):
                out.problems.append(
                    (reasons.MODEL_API_NOT_READY, f"ModelAPI {spec.model_api} is not Ready")
                )
        for name in spec.mcp_servers:
            raw = ctx.resource("MCPServer", ns, name)
            if raw is None:
                out.problems.append((reasons.MCP_SERVER_NOT_FOUND, f"MCPServer {name} not found"))
            elif not is_ready(raw):
                out.problems.append(
                    (reasons.MCP_SERVER_NOT_READY, f"MCPServer {name} is not Ready")
                )
            # The server's own status says where its runtime serves MCP (the path is the
            # runtime's); the default is kaos-mcp's.
            endpoint = ((raw or {}).get("status") or {}).get("endpoint")
            out.mcp.append(Endpoint(name, endpoint or mcp_endpoint(ns, name)))
        for name in spec.agent_network.access:
            peer = ctx.resource("Agent", ns, name)
            # A peer that does not exist yet may come later (peers can name each other),
            # so only one that exists and closed its network is left out.
            exposed = peer is None or (peer.get("spec") or {}).get("agentNetwork", {}).get(
                "expose", True
            )
            if exposed:
                out.peers.append(Endpoint(name, agent_endpoint(ns, name)))
        memory = spec.config.memory
        if memory_mode(memory) == "remote" and memory.memory_store:
            out.store_endpoint = memory_store_endpoint(ns, memory.memory_store)
            raw = ctx.resource("MemoryStore", ns, memory.memory_store)
            if raw is None:
                out.store_problem = (
                    reasons.MEMORY_STORE_NOT_FOUND,
                    f"MemoryStore {memory.memory_store} not found",
                )
            else:
                out.store_ceiling = MemoryStore.model_validate(raw).spec.max_read_scope
                if not is_ready(raw):
                    out.store_problem = (
                        reasons.MEMORY_STORE_NOT_READY,
                        f"MemoryStore {memory.memory_store} is not Ready",
                    )
            if out.store_problem is not None:
                out.problems.append(out.store_problem)
        return out

    def callers(self, agent: Agent) -> tuple[str, ...]:
        if not self.ctx.settings.posture.security_enabled:
            return ()
        peers = self.valid_resources(Agent, agent.namespace)
        return tuple(security.callers_of_agent(agent.name, peers))

    async def sync(self, res: Agent, status: StatusBuilder) -> None:
        agent, settings = res, self.ctx.settings
        status.fields["endpoint"] = agent_endpoint(agent.namespace, agent.name)
        live = self.owned_deployment(agent)
        running = live is not None
        found = self.resolve(agent)

        refusal = agent_refusal(agent, settings.posture, found.store_ceiling)
        if refusal is not None:
            status.condition(reasons.READY, False, refusal.reason, refusal.message)
            status.fields.update(phase=reasons.PHASE_FAILED, message=refusal.message)
            return
        await self.tasks_status(agent, status)

        if found.problems:
            first_reason = found.problems[0][0]
            message = "; ".join(m for _, m in found.problems)
            status.condition(reasons.DEPENDENCIES_READY, False, first_reason, message)
        else:
            status.condition(
                reasons.DEPENDENCIES_READY, True, reasons.DEPENDENCIES_AVAILABLE, "all Ready"
            )

        # A running Agent whose ModelAPI vanished keeps the model it was started with.
        previous = _live_env(live)
        model_url = found.model_api_url or previous.get(names.MODEL_API_URL)
        model_name = found.model_name or previous.get(names.MODEL_NAME)
        ctx = AgentContext(
            images=settings.images,
            posture=settings.posture,
            model_api_url=model_url or "",
            model_name=model_name or "",
            mcp_servers=tuple(found.mcp),
            sub_agents=tuple(found.peers),
            memory_endpoint=found.store_endpoint,
            store_ceiling=found.store_ceiling,
            callers=self.callers(agent),
            telemetry=settings.telemetry,
            gateway=settings.gateway,
            tools_off=tools_off(agent, found, previous),
            keda_served=settings.keda_served,
            scaler_holds_replicas=agent_scaling.scaler_holds_replicas(live),
        )
        # Computed before any wait: a refused override (OverrideRefused) is reported now,
        # not once the dependencies are Ready.
        desired = desired_agent_objects(agent, ctx)
        hold = not running and agent.spec.wait_for_dependencies and bool(found.problems)
        if hold or model_url is None or model_name is None:
            status.condition(
                reasons.READY,
                False,
                reasons.WAITING_FOR_DEPENDENCIES,
                "; ".join(m for _, m in found.problems) or "no model to serve",
            )
            status.fields.update(
                phase=reasons.PHASE_WAITING, message="waiting for dependencies to be Ready"
            )
            return

        if not await self.converge(agent, desired, status):
            return
        self.route_status(agent, agent.spec.gateway_route, status)
        self.schedules_status(agent, status)
        scaler = agent_scaling.scaler_of(agent, settings.keda_served)
        status.fields["scaler"] = scaler
        status.condition(reasons.AUTOSCALED, *agent_scaling.autoscaled_condition(agent, scaler))
        if found.store_endpoint is not None:
            if found.store_problem is not None:
                reason, message = found.store_problem
                status.condition(
                    reasons.MEMORY_DEGRADED,
                    True,
                    reason,
                    f"{message}; serving with short-term memory only",
                )
            else:
                status.condition(
                    reasons.MEMORY_DEGRADED, False, reasons.MEMORY_STORE_READY, "store Ready"
                )
        await self.tools_status(agent, found, model_name or "", status)
        # No message while it waits on nothing but its rollout (the workload's cause, if
        # one is found, puts its own).
        status.fields["message"] = None
        dep = await self.workload_status(
            agent,
            status,
            self.owned_deployment(agent),
            storage_field="spec.taskStore.storageClassName",
        )
        status.fields.update(replicas=dep.replicas, readyReplicas=dep.ready_replicas)

    def schedules_status(self, agent: Agent, status: StatusBuilder) -> None:
        """status.schedules from the cached CronJobs and their latest Jobs; looked at again
        shortly while a finished run's Job has not reached the cache yet."""
        if not agent.spec.schedules:
            return
        ns = agent.namespace
        entries, lagging = agent_schedules.schedules_status(
            agent,
            lambda name: self.ctx.live(CRONJOBS, ns, name),
            lambda name: self.ctx.live(JOBS, ns, name),
            [s.to_wire() for s in agent.status.schedules],
        )
        status.fields["schedules"] = entries
        if lagging:
            status.recheck(SCHEDULE_RECHECK_SECONDS)

    async def tasks_status(self, agent: Agent, status: StatusBuilder) -> None:
        """Condition TasksShared; a Warning Event when it turns False (replicas that keep
        their tasks in their own memory). The Agent runs as asked all the same."""
        shared = agent_tasks.tasks_shared(agent)
        status.condition(reasons.TASKS_SHARED, shared.status, shared.reason, shared.message)
        if shared.status:
            return
        raw = self.ctx.resource(self.kind, agent.namespace, agent.name)
        if raw is not None and _condition_status(raw, reasons.TASKS_SHARED) != "False":
            await self.ctx.record_event(raw, "Warning", shared.reason, shared.message)

    async def tools_status(
        self, agent: Agent, found: Resolution, model: str, status: StatusBuilder
    ) -> None:
        """Condition ToolsSupported while the agent is offered tools and its model's
        capabilities are known; a Warning Event when it turns False. The agent stays Ready:
        it answers, without tools."""
        offered = offered_tools(agent, found)
        caps = found.model_capabilities
        if not offered or caps is None:
            return
        where = f"model {model} of ModelAPI {agent.spec.model_api}"
        if "tools" in caps:
            status.condition(
                reasons.TOOLS_SUPPORTED, True, reasons.MODEL_CALLS_TOOLS, f"{where} calls tools"
            )
            return
        message = (
            f"{where} cannot call tools (capabilities: {', '.join(caps) or 'none'}); the agent"
            f" answers without its {', '.join(offered)}"
        )
        status.condition(reasons.TOOLS_SUPPORTED, False, reasons.MODEL_CANNOT_CALL_TOOLS, message)
        raw = self.ctx.resource(self.kind, agent.namespace, agent.name)
        if raw is not None and _condition_status(raw, reasons.TOOLS_SUPPORTED) != "False":
            await self.ctx.record_event(raw, "Warning", reasons.MODEL_CANNOT_CALL_TOOLS, message)


def _condition_status(raw: Obj, type_: str) -> str | None:
    """The status of the stored object's condition ``type_`` (None: it has none)."""
    for c in (raw.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return str(c.get("status"))
    return None
