"""An MCPServer's desired Deployment and Service, and the environment of ``kaos-mcp``."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from kaos_core import agent_env as names
from kaos_core.crds import reasons
from kaos_core.crds.common import Telemetry
from kaos_core.crds.mcpserver import MCPServer

from kaos_operator.desired import egress, mcp_auth, security
from kaos_operator.desired.common import (
    MCP_PATH,
    MCP_PORT,
    Obj,
    container,
    deployment,
    env_list,
    metadata,
    restricted_security_context,
    service,
    service_url,
)
from kaos_operator.desired.gateway import route_objects
from kaos_operator.desired.modelapi import CONFIG_HASH_ANNOTATION
from kaos_operator.desired.overrides import (
    TELEMETRY_ONLY,
    TELEMETRY_PREFIX,
    SpecRefused,
    reserved_prefixes,
    with_overrides,
)
from kaos_operator.desired.telemetry import telemetry_env
from kaos_operator.settings import BUILTIN_RUNTIMES, GatewayRef, Images, McpRuntime, Posture


@dataclass(frozen=True)
class McpContext:
    images: Images
    posture: Posture = field(default_factory=Posture)
    # With security on: the Agents that list the server (``security.agents_using_mcp``).
    clients: tuple[str, ...] = ()
    # The chart's tracing default; the resource's spec.telemetry overrides it field by field.
    telemetry: Telemetry = field(default_factory=Telemetry)
    # Gateway API on: the Gateway spec.gatewayRoute attaches to.
    gateway: GatewayRef | None = None
    # The runtime registry (the chart's mcpRuntimes), by name.
    runtimes: Mapping[str, McpRuntime] = field(default_factory=dict)


# Where a custom runtime finds spec.params.
PARAMS_ENV = "MCP_PARAMS"


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


@dataclass(frozen=True)
class Launch:
    """How one MCPServer's container runs: from the built-in runtimes or the registry."""

    image: str
    command: list[str] | None
    args: list[str] | None
    port: int
    path: str
    env: dict[str, str]
    params_file: tuple[str, str] | None = None  # (directory, file name) of a params file
    builtin: bool = False


def params_config_map_name(server: MCPServer) -> str:
    return f"{server.name}-params"


def launch(server: MCPServer, ctx: McpContext) -> Launch:
    """The runtime of ``server``: python-string (kaos-mcp), custom (its own image and
    command) or a registered one. Raises ``SpecRefused`` for a name nobody registered."""
    spec = server.spec
    otel = telemetry_env(server, spec.telemetry, ctx.telemetry)
    if spec.runtime == "python-string":
        return Launch(
            image=spec.image or ctx.images.mcp,
            command=["kaos-mcp"],
            args=None,
            port=MCP_PORT,
            path=MCP_PATH,
            env=mcp_env(server, telemetry=ctx.telemetry),
            builtin=True,
        )
    if spec.runtime == "custom":
        params = {PARAMS_ENV: spec.params} if spec.params else {}
        return Launch(
            image=spec.image or "",
            command=list(spec.command or []),
            args=list(spec.args) if spec.args else None,
            port=spec.port or MCP_PORT,
            path=spec.path or MCP_PATH,
            env={**params, **otel},
        )
    runtime = ctx.runtimes.get(spec.runtime)
    if runtime is None:
        known = ", ".join(sorted({*BUILTIN_RUNTIMES, *ctx.runtimes}))
        raise SpecRefused(
            reasons.RUNTIME_NOT_FOUND,
            [f"spec.runtime: {spec.runtime} is not a runtime of the operator (known: {known})"],
        )
    env = dict(runtime.env)
    args = list(runtime.args)
    params_file = None
    if spec.params:
        if runtime.params == "env":
            env[runtime.params_env] = spec.params
        elif runtime.params == "args":
            args += [line for line in spec.params.splitlines() if line.strip()]
        elif runtime.params == "file":
            directory, _, file_name = runtime.params_path.rpartition("/")
            params_file = (directory, file_name)
    return Launch(
        image=spec.image or runtime.image,
        command=list(runtime.command) if runtime.command else None,
        args=args or None,
        port=runtime.port,
        path=runtime.path,
        env={**env, **otel},
        params_file=params_file,
    )


def server_endpoint(server: MCPServer, ctx: McpContext) -> str:
    """URL of the server's MCP endpoint: the Service's port, the runtime's path."""
    try:
        path = launch(server, ctx).path
    except SpecRefused:
        path = MCP_PATH
    return service_url(server.name, server.namespace, MCP_PORT, path)


def desired_mcpserver_objects(server: MCPServer, ctx: McpContext) -> list[Obj]:
    spec = server.spec
    run = launch(server, ctx)
    objects: list[Obj] = []
    mounts: list[Obj] = []
    volumes: list[Obj] = []
    annotations: dict[str, str] = {}
    if run.params_file is not None:
        directory, file_name = run.params_file
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata(server, params_config_map_name(server)),
                "data": {file_name: spec.params or ""},
            }
        )
        mounts.append({"name": "params", "mountPath": directory, "readOnly": True})
        # New params roll the pods: a runtime reads its file once, at start.
        digest = hashlib.sha256((spec.params or "").encode()).hexdigest()[:16]
        annotations[CONFIG_HASH_ANNOTATION] = digest
        volumes.append({"name": "params", "configMap": {"name": params_config_map_name(server)}})
    # Security on: kaos-mcp verifies its callers (``mcp_auth``).
    verifies = ctx.posture.security_enabled and run.builtin
    if verifies:
        run = replace(run, env={**run.env, **mcp_auth.mcp_security_env(ctx.posture)})
        mounts += [security.token_mount(), security.callers_mount()]
        volumes += [mcp_auth.api_token_volume(), security.callers_volume(server.name)]
    # kaos-mcp runs as the images' nonroot user; another image keeps its own user, which
    # must not be root either.
    security_context = restricted_security_context()
    if not run.builtin:
        security_context = {
            k: v for k, v in security_context.items() if k not in ("runAsUser", "runAsGroup")
        }
    main = container(
        "mcp",
        run.image,
        ctx.images.pull_policy,
        port=run.port,
        command=run.command,
        args=run.args,
        env=env_list(run.env),
        resources=spec.resources,
        # A TCP check: the MCP transport answers plain GETs with 4xx by design.
        readiness={"tcpSocket": {"port": "http"}, "periodSeconds": 10},
        volume_mounts=mounts or None,
        security=security_context,
    )
    dep = deployment(
        server,
        container=main,
        replicas=spec.replicas,
        volumes=volumes or None,
        pod_annotations=annotations,
        pod_security={"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    )
    if spec.service_account_name:
        # The tools call the Kubernetes API as this account: its token is mounted.
        pod_spec = dep["spec"]["template"]["spec"]
        pod_spec["serviceAccountName"] = spec.service_account_name
        pod_spec["automountServiceAccountToken"] = True
    # kaos-mcp reads MCP_*: all the operator's. Another runtime's variables are the
    # platform's, but for the ones the operator sets.
    reserved = reserved_prefixes("MCP_", TELEMETRY_PREFIX) if run.builtin else TELEMETRY_ONLY
    objects += [with_overrides(dep, spec, reserved=reserved), service(server, MCP_PORT)]
    objects += route_objects(server, MCP_PORT, spec.gateway_route, ctx.gateway)
    if ctx.posture.security_enabled:
        # The pods' port (a policy selects pods, not the Service): the runtime's.
        policy = security.network_policy(server, run.port, {"Agent": ctx.clients})
        # The operator lists the tools (status.availableTools) of every runtime.
        policy = egress.admitting(policy, run.port, egress.operator_peer(ctx.posture))
        objects.append(egress.with_egress(policy, egress.own_egress(spec.egress, ctx.posture)))
        if verifies:
            objects.append(security.callers_config_map(server, ctx.clients))
    return objects
