"""MCPServer: apply ``kaos-mcp`` with the tools' source; the endpoint goes into status."""

from __future__ import annotations

from kaos_core.crds import MCPServer

from kaos_operator.desired import McpContext, desired_mcpserver_objects
from kaos_operator.desired.mcpserver import mcp_endpoint
from kaos_operator.queue import Result
from kaos_operator.reconcilers.base import BaseReconciler, deployment_state


class MCPServerReconciler(BaseReconciler):
    kind = "MCPServer"

    async def reconcile(self, namespace: str, name: str) -> Result:
        raw = self.ctl.resource("MCPServer", namespace, name)
        if raw is None or raw["metadata"].get("deletionTimestamp"):
            return Result()
        server = MCPServer.model_validate(raw)
        status = self.builder(raw)
        status.fields["endpoint"] = mcp_endpoint(namespace, name)
        desired = desired_mcpserver_objects(server, McpContext(images=self.ctl.settings.images))
        if await self.apply_guarded(raw, server, desired, status):
            self.workload_status(status, deployment_state(self.owned_deployment(server)))
        await self.write_status(raw, status)
        return Result()
