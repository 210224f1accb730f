"""MCPServer: apply ``kaos-mcp`` with the tools' source; the endpoint goes into status."""

from __future__ import annotations

from kaos_core.crds import Agent, MCPServer

from kaos_operator.desired import McpContext, desired_mcpserver_objects, security
from kaos_operator.desired.mcpserver import mcp_endpoint
from kaos_operator.reconcilers.base import Reconciler, deployment_state
from kaos_operator.status import StatusBuilder


class MCPServerReconciler(Reconciler[MCPServer]):
    model = MCPServer

    async def sync(self, res: MCPServer, status: StatusBuilder) -> None:
        status.fields["endpoint"] = mcp_endpoint(res.namespace, res.name)
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
        )
        if await self.converge(res, desired_mcpserver_objects(res, ctx), status):
            self.workload_status(status, deployment_state(self.owned_deployment(res)))
