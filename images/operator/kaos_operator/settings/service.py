"""The operator's settings: one environment-backed object, validated before anything
starts, of groups documented like every service's (``images/operator/SETTINGS.md``).

Reconcilers read ``reconcile`` (the images they deploy, the posture they enforce, the
pods' tracing default, the Gateway and the MCP runtime registry); the elector ``leader``.
The posture is the operator's alone: no Agent or MemoryStore can change what it makes the
memory services enforce.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from kaos_core.crds.common import Telemetry
from kaos_core.http.limits import HttpLimits
from kaos_core.settings import ServiceSettings, group
from kaos_core.telemetry.settings import TelemetrySettings

from kaos_operator.settings.images import Images
from kaos_operator.settings.leader import LeaderElection, LeaderSettings
from kaos_operator.settings.posture import Posture
from kaos_operator.settings.process import Cluster, QueueSettings, Serving
from kaos_operator.settings.routing import GatewayApi, GatewayRef
from kaos_operator.settings.runtimes import McpRuntime, McpRuntimes
from kaos_operator.settings.telemetry import PodTelemetry


@dataclass(frozen=True)
class ReconcileSettings:
    """What reconcilers read: the images they deploy and the posture they enforce."""

    images: Images
    posture: Posture
    # The tracing default of every pod (the chart's ``telemetry`` values).
    telemetry: Telemetry = field(default_factory=Telemetry)
    # Gateway API on (the chart's ``gatewayAPI``): the Gateway routes attach to.
    gateway: GatewayRef | None = None
    # The MCP runtime registry (the chart's ``mcpRuntimes``), by name.
    mcp_runtimes: Mapping[str, McpRuntime] = field(default_factory=dict)
    # Not a setting: whether the cluster serves KEDA's ScaledObjects, found by the
    # controller when it starts (an Agent's spec.autoscaling makes one, else an HPA).
    keda_served: bool = False


class OperatorSettings(ServiceSettings):
    """Every setting of the operator process."""

    env_prefix: ClassVar[str] = "KAOS_OPERATOR_"

    posture: Posture = group(Posture.title)
    images: Images = group(Images.title)
    pod_telemetry: PodTelemetry = group(PodTelemetry.title)
    gateway_api: GatewayApi = group(GatewayApi.title)
    mcp_runtimes: McpRuntimes = group(McpRuntimes.title)
    cluster: Cluster = group(Cluster.title)
    queue: QueueSettings = group(QueueSettings.title)
    election: LeaderElection = group(LeaderElection.title)
    server: Serving = group(Serving.title)
    limits: HttpLimits = group(HttpLimits.title)
    telemetry: TelemetrySettings = group(TelemetrySettings.title)

    @property
    def gateway(self) -> GatewayRef | None:
        return self.gateway_api.ref()

    @property
    def reconcile(self) -> ReconcileSettings:
        return ReconcileSettings(
            images=self.images,
            posture=self.posture,
            telemetry=self.pod_telemetry.defaults(),
            gateway=self.gateway,
            mcp_runtimes=self.mcp_runtimes.runtimes(),
        )

    @property
    def leader(self) -> LeaderSettings:
        return self.election.resolve(self.cluster.kubeconfig)


# The groups the settings tables document, in order, by title (the connection limits and
# tracing every server reads are documented once, on their own pages).
GROUPS: dict[str, str] = {
    name: OperatorSettings.model_fields[name].title or name
    for name in OperatorSettings.groups()
    if name not in ("limits", "telemetry")
}
