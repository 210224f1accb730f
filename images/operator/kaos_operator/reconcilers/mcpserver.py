"""MCPServer: apply its runtime (kaos-mcp with the tools' source, a custom image, or one
of the registry's); the endpoint, and once it is available the tools it offers (read
over MCP), go into status."""

from __future__ import annotations

import logging

from kaos_core.crds import Agent, MCPServer, reasons

from kaos_operator.context import ReconcileContext
from kaos_operator.desired import McpContext, desired_mcpserver_objects, security
from kaos_operator.desired.mcpserver import server_endpoint
from kaos_operator.reconcilers.base import Reconciler, deployment_state, recheck_delay
from kaos_operator.status import Clock, StatusBuilder, utc_now
from kaos_operator.tools import ToolLister, list_tool_names

log = logging.getLogger(__name__)


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class MCPServerReconciler(Reconciler[MCPServer]):
    model = MCPServer

    def __init__(
        self,
        ctx: ReconcileContext,
        *,
        clock: Clock = utc_now,
        tool_lister: ToolLister = list_tool_names,
    ) -> None:
        super().__init__(ctx, clock=clock)
        self._list_tools = tool_lister
        # (namespace, name) -> ((uid, generation), tool names) of the last good listing:
        # a server's tools change only with its spec, so one listing per generation.
        self._tools: dict[tuple[str, str], tuple[tuple[str, int], list[str]]] = {}
        # (namespace, name) -> failed listings in a row: the next one waits twice as long.
        self._failures: dict[tuple[str, str], int] = {}

    async def sync(self, res: MCPServer, status: StatusBuilder) -> None:
        settings = self.ctx.settings
        clients: tuple[str, ...] = ()
        if settings.posture.security_enabled:
            agents = self.valid_resources(Agent, res.namespace)
            clients = tuple(security.agents_using_mcp(res.name, agents))
        ctx = McpContext(
            images=settings.images,
            posture=settings.posture,
            clients=clients,
            telemetry=settings.telemetry,
            gateway=settings.gateway,
            runtimes=settings.mcp_runtimes,
        )
        endpoint = server_endpoint(res, ctx)
        status.fields["endpoint"] = endpoint
        if await self.converge(res, desired_mcpserver_objects(res, ctx), status):
            self.route_status(res, res.spec.gateway_route, status)
            dep = deployment_state(self.owned_deployment(res))
            self.workload_status(status, dep)
            if dep.available:
                await self._tool_status(res, endpoint, status)

    async def _tool_status(self, res: MCPServer, endpoint: str, status: StatusBuilder) -> None:
        key = (res.namespace, res.name)
        version = (res.metadata.uid, res.metadata.generation)
        cached = self._tools.get(key)
        if cached is not None and cached[0] == version:
            names = cached[1]
        else:
            try:
                names = await self._list_tools(endpoint)
            except Exception as exc:  # noqa: BLE001  (a server that is down is reported)
                # The class only: a transport error's text can carry the server's answer.
                cause = type(_leaf(exc)).__name__
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
                # A Service answers some time after its pod turns Ready: list again, without
                # waiting for an event that may never come.
                delay = recheck_delay(failures)
                log.info(
                    "tools not listed",
                    extra={"server": res.name, "error": cause, "retry_in_s": delay},
                )
                status.condition(
                    reasons.TOOLS_LISTED,
                    False,
                    reasons.TOOL_LIST_FAILED,
                    f"tools/list at {endpoint} failed ({cause}); retrying",
                )
                status.recheck(delay)
                if res.status.available_tools is not None:
                    status.fields["availableTools"] = list(res.status.available_tools)
                return
            self._failures.pop(key, None)
            self._tools[key] = (version, names)
        status.fields["availableTools"] = names
        status.condition(
            reasons.TOOLS_LISTED, True, reasons.TOOLS_READ, f"{len(names)} tools read over MCP"
        )
