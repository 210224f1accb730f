"""An Agent's autoscaling: the bounds and targets the operator hands to the cluster's scaler.

The operator makes KEDA's ScaledObject when the cluster serves it (scaling on the
agent's own load: its in-flight runs and queued A2A tasks), otherwise a
HorizontalPodAutoscaler on CPU; ``status.scaler`` says which.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from kaos_core.crds.common import CRDModel, cel

# The most replicas an Agent may run (``spec.replicas``' own bound).
MAX_REPLICAS = 100
# CPU utilisation the HorizontalPodAutoscaler aims at when targetCPUUtilization is unset.
DEFAULT_CPU_UTILIZATION = 70

# status.scaler: what scales the Agent.
Scaler = Literal["keda", "hpa", "none"]


class AgentAutoscaling(CRDModel):
    """Replicas follow the agent's load between ``minReplicas`` and ``maxReplicas``."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.maxReplicas >= self.minReplicas",
                "maxReplicas must be at least minReplicas",
            ),
        )
    )

    min_replicas: int = Field(
        default=1, ge=1, le=MAX_REPLICAS, description="Fewest replicas the scaler keeps."
    )
    max_replicas: int = Field(
        ge=1, le=MAX_REPLICAS, description="Most replicas the scaler may run (at most 100)."
    )
    target_runs_per_replica: int = Field(
        default=4,
        ge=1,
        le=10_000,
        description="With KEDA: the agent's runs in flight plus queued A2A tasks each"
        " replica should carry; replicas = ceil(load / target).",
    )
    target_cpu_utilization: int | None = Field(
        default=None,
        alias="targetCPUUtilization",
        ge=1,
        le=100,
        description="CPU utilisation (percent of the container's request) to aim at: the"
        " HorizontalPodAutoscaler's target without KEDA (default 70), and a second trigger"
        " of KEDA's ScaledObject when set. Needs spec.resources.requests.cpu.",
    )
