"""An MCPServer's desired Deployment and Service, and the environment of ``kaos-mcp``."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaos_core import agent_env as names
from kaos_core.crds.common import Telemetry
from kaos_core.crds.mcpserver import MCPServer

from kaos_operator.desired import security
from kaos_operator.desired.common import (
    MCP_PATH,
    MCP_PORT,
    Obj,
    container,
    deployment,
    env_list,
    restricted_security_context,
    service,
    service_url,
)
from kaos_operator.desired.telemetry import telemetry_env
from kaos_operator.settings import Images, Posture


@dataclass(frozen=True)
class McpContext:
    images: Images
    posture: Posture = field(default_factory=Posture)
    # With security on: the Agents that list the server (``security.agents_using_mcp``).
    clients: tuple[str, ...] = ()
    # The chart's tracing default; the resource's spec.telemetry overrides it field by field.
    telemetry: Telemetry = field(default_factory=Telemetry)


def mcp_endpoint(namespace: str, name: str) -> str:
    """URL of the server's streamable-HTTP MCP endpoint."""
    return service_url(name, namespace, MCP_PORT, MCP_PATH)


def allowed_hosts(namespace: str, name: str) -> list[str]:
    """Host headers the MCP transport accepts: the Service's names, any port."""
    hosts = [name, f"{name}.{namespace}", f"{name}.{namespace}.svc"]
    hosts.append(f"{name}.{namespace}.svc.cluster.local")
    return [f"{h}:*" for h in hosts]


def mcp_env(
    server: MCPServer,
    *,
    host: str = "0.0.0.0",
    port: int = MCP_PORT,
    extra_allowed_hosts: tuple[str, ...] = (),
    telemetry: Telemetry | None = None,
) -> dict[str, str]:
    """The MCP runtime's environment (names from ``kaos_core.agent_env``); ``telemetry``
    is the operator's tracing default (none: the server's own block only)."""
    spec = server.spec
    hosts = [*allowed_hosts(server.namespace, server.name), *extra_allowed_hosts]
    return {
        names.MCP_HOST: host,
        names.MCP_PORT: str(port),
        names.MCP_RUNTIME: spec.runtime,
        names.MCP_TOOLS_STRING: spec.params or "",
        names.MCP_ALLOWED_HOSTS: ",".join(hosts),
        **telemetry_env(server, spec.telemetry, telemetry or Telemetry()),
    }


def desired_mcpserver_objects(server: MCPServer, ctx: McpContext) -> list[Obj]:
    spec = server.spec
    main = container(
        "mcp",
        spec.image or ctx.images.mcp,
        ctx.images.pull_policy,
        port=MCP_PORT,
        command=["kaos-mcp"],
        env=env_list(mcp_env(server, telemetry=ctx.telemetry)),
        resources=spec.resources,
        # A TCP check: the MCP transport answers plain GETs with 4xx by design.
        readiness={"tcpSocket": {"port": "http"}, "periodSeconds": 10},
        security=restricted_security_context(),
    )
    objects = [
        deployment(
            server,
            container=main,
            replicas=spec.replicas,
            pod_security={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        ),
        service(server, MCP_PORT),
    ]
    if ctx.posture.security_enabled:
        objects.append(security.network_policy(server, MCP_PORT, {"Agent": ctx.clients}))
    return objects
