"""The MCPServer resource: a Model Context Protocol tool server."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from kaos_core.crds.common import (
    AGE,
    ENDPOINT,
    PHASE,
    TEXT_MAX,
    CommonStatus,
    CRDModel,
    CustomObject,
    KindInfo,
    PrinterColumn,
    Telemetry,
    cel,
    telemetry_field,
)

MCPRuntime = Literal["python-string"]


class MCPServerSpec(CRDModel):
    """Desired state of an MCPServer."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.runtime != 'python-string' || (has(self.params) && size(self.params) > 0)",
                "runtime python-string requires params (the tools' Python source)",
            ),
        )
    )

    runtime: MCPRuntime = Field(
        default="python-string",
        description="python-string: kaos-mcp serves the functions defined in params.",
    )
    params: str | None = Field(
        default=None, max_length=TEXT_MAX, description="Runtime parameters (Python source)."
    )
    replicas: int = Field(default=1, ge=0, le=100)
    image: str | None = Field(default=None, max_length=512)
    resources: dict[str, Any] | None = Field(
        default=None,
        description="Container resources (requests, limits), as in a Pod spec.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    telemetry: Telemetry | None = telemetry_field()


class MCPServerStatus(CommonStatus):
    """Observed state of an MCPServer."""


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
