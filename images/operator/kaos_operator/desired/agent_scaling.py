"""An Agent's autoscaler, as pure functions: which scaler, its object, who owns replicas.

With ``spec.autoscaling`` the operator makes the scaler the cluster offers:

- KEDA's ScaledObject (``keda.sh/v1alpha1``) when the cluster serves it, on the agent's
  own load: KEDA's ``metrics-api`` scaler reads the agent's load endpoint (``LOAD_PATH``)
  through its Service, an ``AverageValue`` target of ``targetRunsPerReplica``. The
  endpoint answers for the whole Agent (see ``kaos_agent.load``), so the average KEDA's
  HorizontalPodAutoscaler takes (value / current replicas) is the load per replica, and
  replicas = ceil(load / target). ``targetCPUUtilization``, when set, is a second trigger.
- Otherwise a HorizontalPodAutoscaler (``autoscaling/v2``) on CPU utilisation.

The scaler then owns the Deployment's replicas. The operator writes ``spec.replicas``
(clamped to the bounds, and noted in ``START_ANNOTATION``) only until the scaler has
moved it: a field the operator stops applying while it is its sole manager would be reset
to 1 by the server, so the operator lets go only once the scaler's own write, which took
the field over, keeps it in place.
"""

from __future__ import annotations

from kaos_core.crds import Agent, reasons
from kaos_core.crds.autoscaling import DEFAULT_CPU_UTILIZATION, AgentAutoscaling, Scaler

from kaos_operator.desired.common import Obj, metadata, service_url
from kaos_operator.desired.security import admit

SCALED_OBJECT_API = "keda.sh/v1alpha1"
HPA_API = "autoscaling/v2"
# The agent's load: {"load": <runs in flight + queued tasks, Agent-wide>} (kaos_agent.load).
LOAD_PATH = "/load"
LOAD_FIELD = "load"
# On an autoscaled Agent's Deployment: the replicas the operator starts it at. Live
# replicas that differ were written by the scaler, which then holds them.
START_ANNOTATION = "kaos.tools/start-replicas"


def scaler_of(agent: Agent, keda_served: bool) -> Scaler:
    """What scales ``agent``: keda, hpa, or none without spec.autoscaling."""
    if agent.spec.autoscaling is None:
        return "none"
    return "keda" if keda_served else "hpa"


def _target(agent: Agent) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": agent.name}


def _cpu(scaling: AgentAutoscaling) -> int:
    return scaling.target_cpu_utilization or DEFAULT_CPU_UTILIZATION


def scaled_object(agent: Agent, scaling: AgentAutoscaling, port: int) -> Obj:
    """KEDA's ScaledObject on the agent's load endpoint (and CPU, when asked)."""
    triggers: list[Obj] = [
        {
            "type": "metrics-api",
            "name": "agent-load",
            "metricType": "AverageValue",
            "metadata": {
                "url": service_url(agent.name, agent.namespace, port, LOAD_PATH),
                "format": "json",
                "valueLocation": LOAD_FIELD,
                "targetValue": str(scaling.target_runs_per_replica),
            },
        }
    ]
    if scaling.target_cpu_utilization is not None:
        triggers.append(
            {
                "type": "cpu",
                "metricType": "Utilization",
                "metadata": {"value": str(scaling.target_cpu_utilization)},
            }
        )
    return {
        "apiVersion": SCALED_OBJECT_API,
        "kind": "ScaledObject",
        "metadata": metadata(agent),
        "spec": {
            "scaleTargetRef": _target(agent),
            "minReplicaCount": scaling.min_replicas,
            "maxReplicaCount": scaling.max_replicas,
            "triggers": triggers,
        },
    }


def admit_scaler(
    policy: Obj, agent: Agent, keda_served: bool, keda_namespace: str, port: int
) -> Obj:
    """The Agent's NetworkPolicy, admitting KEDA's pods (its namespace's) on ``port`` when
    KEDA scales the Agent and the policy admits only its callers: KEDA's metrics-api scaler
    reads ``GET /load`` through the Service, and a policy that drops it leaves the Agent
    at its minimum whatever its load (the endpoint itself needs no token)."""
    if scaler_of(agent, keda_served) != "keda" or agent.spec.agent_network.expose:
        return policy
    namespace = {"matchLabels": {"kubernetes.io/metadata.name": keda_namespace}}
    return admit(policy, {"namespaceSelector": namespace}, port)


def horizontal_pod_autoscaler(agent: Agent, scaling: AgentAutoscaling) -> Obj:
    """A HorizontalPodAutoscaler on CPU utilisation (the cluster has no KEDA)."""
    return {
        "apiVersion": HPA_API,
        "kind": "HorizontalPodAutoscaler",
        "metadata": metadata(agent),
        "spec": {
            "scaleTargetRef": _target(agent),
            "minReplicas": scaling.min_replicas,
            "maxReplicas": scaling.max_replicas,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {
                        "name": "cpu",
                        "target": {"type": "Utilization", "averageUtilization": _cpu(scaling)},
                    },
                }
            ],
        },
    }


def scaler_objects(agent: Agent, keda_served: bool, port: int) -> list[Obj]:
    """The Agent's scaler object: none, a ScaledObject or a HorizontalPodAutoscaler."""
    scaling = agent.spec.autoscaling
    if scaling is None:
        return []
    if keda_served:
        return [scaled_object(agent, scaling, port)]
    return [horizontal_pod_autoscaler(agent, scaling)]


def scaler_holds_replicas(deployment: Obj | None) -> bool:
    """Whether the scaler has moved the live Deployment's replicas away from the start the
    operator last applied (``START_ANNOTATION``). A write that changed them took the field
    from the operator (an update takes what it changes), so the operator may stop applying
    it without the server resetting it. Read from the object, not its managedFields: the
    operator's cache keeps none."""
    if deployment is None:
        return False
    start = (deployment.get("metadata", {}).get("annotations") or {}).get(START_ANNOTATION)
    replicas = (deployment.get("spec") or {}).get("replicas")
    return start is not None and str(replicas) != start


def start_replicas(agent: Agent) -> int:
    """Where an autoscaled Agent starts: spec.replicas inside the scaler's bounds."""
    scaling = agent.spec.autoscaling
    if scaling is None:
        return agent.spec.replicas
    return min(max(agent.spec.replicas, scaling.min_replicas), scaling.max_replicas)


def deployment_replicas(agent: Agent, scaler_holds: bool) -> int | None:
    """``spec.replicas`` to apply on the Deployment; None: leave it to the scaler."""
    if agent.spec.autoscaling is not None and scaler_holds:
        return None
    return start_replicas(agent)


def with_scaling(deployment: Obj, agent: Agent, scaler_holds: bool) -> Obj:
    """``deployment`` with the replicas the operator applies (none once the scaler holds
    them) and, when autoscaled, the start it applies them from."""
    spec = dict(deployment["spec"])
    meta = dict(deployment["metadata"])
    replicas = deployment_replicas(agent, scaler_holds)
    if replicas is None:
        spec.pop("replicas", None)
    else:
        spec["replicas"] = replicas
    if agent.spec.autoscaling is not None:
        start = str(start_replicas(agent))
        meta["annotations"] = {**(meta.get("annotations") or {}), START_ANNOTATION: start}
    return {**deployment, "metadata": meta, "spec": spec}


def autoscaled_condition(agent: Agent, scaler: Scaler) -> tuple[bool, str, str]:
    """Condition Autoscaled: (status, reason, message naming the scaler)."""
    scaling = agent.spec.autoscaling
    if scaling is None or scaler == "none":
        return False, reasons.AUTOSCALING_OFF, "no spec.autoscaling: spec.replicas is applied"
    bounds = f"between {scaling.min_replicas} and {scaling.max_replicas} replicas"
    if scaler == "keda":
        what = f"the agent's load, {scaling.target_runs_per_replica} runs per replica"
        if scaling.target_cpu_utilization is not None:
            what += f", and CPU at {scaling.target_cpu_utilization}%"
        return (
            True,
            reasons.KEDA_SCALED_OBJECT,
            f"KEDA ScaledObject {agent.name} scales {bounds} on {what}",
        )
    return (
        True,
        reasons.HORIZONTAL_POD_AUTOSCALER,
        f"HorizontalPodAutoscaler {agent.name} scales {bounds} on CPU at {_cpu(scaling)}%"
        " (the cluster serves no KEDA ScaledObjects)",
    )
