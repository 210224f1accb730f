"""MCPServer: apply its runtime (kaos-mcp with the tools' source, a custom image, or one
of the registry's); the endpoint, and once it is available the tools it offers (read
over MCP), go into status."""

from __future__ import annotations

import logging

from kaos_core.auth.tokenfile import TokenFile
from kaos_core.crds import Agent, MCPServer, reasons

from kaos_operator.context import ReconcileContext, WorkloadReader
from kaos_operator.desired import McpContext, desired_mcpserver_objects, security
from kaos_operator.desired.mcpserver import server_endpoint
from kaos_operator.reconcilers.base import Reconciler
from kaos_operator.reconcilers.reads import BackendReads, ReadFailure, ReadPending, report_reading
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
        workload_reader: WorkloadReader | None = None,
    ) -> None:
        super().__init__(ctx, clock=clock, workload_reader=workload_reader)
        self._list_tools = tool_lister
        # Security on: the operator's own token of audience kaos.dev/mcp (kubelet rotates it).
        posture = ctx.settings.posture
        token_file = posture.operator_mcp_token_file if posture.security_enabled else None
        self._token = None if token_file is None else TokenFile(token_file)
        # A server's tools change only with its spec: one listing per generation.
        self._tools: BackendReads[list[str]] = self.backend_reads()

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
            dep = await self.workload_status(res, status, self.owned_deployment(res))
            if dep.available:
                await self._tool_status(res, endpoint, status)

    async def _tool_status(self, res: MCPServer, endpoint: str, status: StatusBuilder) -> None:
        token = None if self._token is None else self._token.read()
        names = self._tools.read(res, lambda: self._list_tools(endpoint, token))
        if isinstance(names, ReadPending):
            report_reading(
                status,
                reasons.TOOLS_LISTED,
                res.status.condition(reasons.TOOLS_LISTED),
                failed=reasons.TOOL_LIST_FAILED,
                reading=reasons.TOOLS_LISTING,
                message=f"tools/list at {endpoint}",
            )
            if res.status.available_tools is not None:
                status.fields["availableTools"] = list(res.status.available_tools)
            return
        if isinstance(names, ReadFailure):
            # The class only: a transport error's text can carry the server's answer.
            cause = type(_leaf(names.error)).__name__
            # A Service answers some time after its pod turns Ready: list again, without
            # waiting for an event that may never come.
            log.info(
                "tools not listed",
                extra={"server": res.name, "error": cause, "retry_in_s": names.delay},
            )
            status.condition(
                reasons.TOOLS_LISTED,
                False,
                reasons.TOOL_LIST_FAILED,
                f"tools/list at {endpoint} failed ({cause}); retrying",
            )
            status.recheck(names.delay)
            if res.status.available_tools is not None:
                status.fields["availableTools"] = list(res.status.available_tools)
            return
        status.fields["availableTools"] = names
        status.condition(
            reasons.TOOLS_LISTED, True, reasons.TOOLS_READ, f"{len(names)} tools read over MCP"
        )
