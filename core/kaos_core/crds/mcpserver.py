"""The MCPServer resource: a Model Context Protocol tool server."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import ConfigDict, Field

from kaos_core.crds.common import (
    AGE,
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
    image_field,
    replicas_field,
    resources_field,
    telemetry_field,
)
from kaos_core.crds.egress import EgressRule, egress_field
from kaos_core.crds.gateway import GatewayRoute, gateway_route_field
from kaos_core.crds.overrides import (
    ContainerOverride,
    PodOverride,
    container_field,
    pod_field,
)

# A runtime: python-string and custom are built in, any other name is looked up in the
# operator's registry (the chart's mcpRuntimes).
RUNTIME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ToolName = Annotated[str, Field(max_length=256)]


class MCPServerSpec(CRDModel):
    """Desired state of an MCPServer."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.runtime != 'python-string' || (has(self.params) && size(self.params) > 0)",
                "runtime python-string requires params (the tools' Python source)",
            ),
            (
                "self.runtime != 'custom' || (has(self.image) && has(self.command))",
                "runtime custom requires image and command",
            ),
            (
                "self.runtime == 'custom' || (!has(self.command) && !has(self.args)"
                " && !has(self.port) && !has(self.path))",
                "command, args, port and path are for runtime custom (a registered runtime"
                " brings its own)",
            ),
        )
    )

    runtime: str = Field(
        default="python-string",
        max_length=NAME_MAX,
        pattern=RUNTIME,
        description="python-string: kaos-mcp serves the functions defined in params; custom: "
        "image and command as given; any other name: a runtime of the chart's mcpRuntimes.",
    )
    params: str | None = Field(
        default=None,
        max_length=TEXT_MAX,
        description="Runtime parameters: the tools' Python source (python-string), else "
        "passed as the runtime says (custom: the MCP_PARAMS variable).",
    )
    command: list[Annotated[str, Field(max_length=1024)]] | None = Field(
        default=None, min_length=1, max_length=LIST_MAX, description="custom: the command."
    )
    args: list[Annotated[str, Field(max_length=4096)]] | None = Field(
        default=None, max_length=LIST_MAX, description="custom: its arguments."
    )
    port: int | None = Field(
        default=None, ge=1, le=65535, description="custom: the port it serves MCP on (8000)."
    )
    path: str | None = Field(
        default=None,
        max_length=256,
        pattern=r"^/[-a-zA-Z0-9._~/]*$",
        description="custom: the path of its streamable-HTTP endpoint (/mcp).",
    )
    service_account_name: str | None = Field(
        default=None,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
        description="ServiceAccount of the pods, with its token mounted: for runtimes that "
        "call the Kubernetes API (bind it only the rights the tools need).",
    )
    replicas: int = replicas_field()
    image: str | None = image_field(
        "the runtime's (python-string: the chart's kaos-agent image, which ships kaos-mcp; a "
        "registered runtime: its own). Required for runtime custom"
    )
    resources: dict[str, Any] | None = resources_field()
    telemetry: Telemetry | None = telemetry_field()
    container: ContainerOverride | None = container_field()
    pod: PodOverride | None = pod_field()
    gateway_route: GatewayRoute | None = gateway_route_field()
    egress: list[EgressRule] = egress_field("the APIs its tools call")


class MCPServerStatus(CommonStatus):
    """Observed state of an MCPServer."""

    available_tools: list[ToolName] | None = Field(
        default=None,
        max_length=1024,
        description="Names of the tools the server offers, read over MCP (tools/list) once "
        "it is available.",
    )


class MCPServer(CustomObject):
    kind: str = "MCPServer"
    spec: MCPServerSpec
    status: MCPServerStatus = Field(default_factory=MCPServerStatus)

    info: ClassVar[KindInfo] = KindInfo(
        kind="MCPServer",
        plural="mcpservers",
        singular="mcpserver",
        short_names=("mcp",),
        description="A Model Context Protocol tool server.",
        spec=MCPServerSpec,
        status=MCPServerStatus,
        printer_columns=(PrinterColumn("Runtime", ".spec.runtime"), PHASE, ENDPOINT, AGE),
    )
