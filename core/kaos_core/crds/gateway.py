"""``gatewayRoute``: expose an Agent, ModelAPI or MCPServer through a Gateway API Gateway.

With the chart's ``gatewayAPI.enabled`` the operator makes one HTTPRoute per resource
that has this block, attached to the Gateway the chart names, matching a path prefix
(``/<namespace>/<kind>/<name>`` unless set) that it strips before the request reaches
the Service. The route is owned by the resource and pruned when the block goes away.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field

from kaos_core.crds.common import CRDModel, cel

# Gateway API's Duration (GEP-2257): 1 to 4 parts of up to five digits and a unit.
DURATION = r"^([0-9]{1,5}(h|m|s|ms)){1,4}$"


class RouteTimeouts(CRDModel):
    """HTTPRoute rule timeouts (Gateway API durations such as 30s or 1m30s)."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!(has(self.request) && has(self.backendRequest))"
                " || duration(self.backendRequest) <= duration(self.request)",
                "backendRequest must not exceed request",
            )
        )
    )

    request: str | None = Field(
        default=None,
        max_length=32,
        pattern=DURATION,
        description="Time from the gateway receiving the request to the response (e.g. 120s).",
    )
    backend_request: str | None = Field(
        default=None,
        max_length=32,
        pattern=DURATION,
        description="Time of one try from the gateway to the Service.",
    )


class GatewayRoute(CRDModel):
    """An HTTPRoute to this resource's Service through the chart's Gateway."""

    path_prefix: str | None = Field(
        default=None,
        max_length=1024,
        pattern=r"^(/[-a-zA-Z0-9._~]+)+$",
        description="Path prefix matched and stripped; defaults to /<namespace>/<kind>/<name>.",
    )
    timeouts: RouteTimeouts | None = None


def gateway_route_field() -> Any:
    return Field(
        default=None,
        description="An HTTPRoute through the chart's Gateway (needs gatewayAPI.enabled).",
    )
