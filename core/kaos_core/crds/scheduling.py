"""Where the pods may run: tolerations, affinity and topology spread, in Kubernetes' own
shapes (``pod.tolerations``, ``pod.affinity``, ``pod.topologySpreadConstraints``).

Written as models so that admission refuses a misspelt operator or a toleration that
contradicts itself with the field's path; the descriptions are the Pod API's, shortened.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field

from kaos_core.crds.common import LIST_MAX, NAME_MAX, CRDModel, cel
from kaos_core.crds.shapes import Key, ShortText

TolerationOperator = Literal["Exists", "Equal"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class Toleration(CRDModel):
    """Lets the pods run on nodes with a matching taint."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.operator) || self.operator != 'Exists' || !has(self.value)"
                " || self.value == ''",
                "a toleration with operator Exists takes no value",
            ),
            (
                "!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
                "tolerationSeconds needs effect NoExecute",
            ),
            (
                "has(self.key) || (has(self.operator) && self.operator == 'Exists')",
                "a toleration without a key needs operator Exists",
            ),
        )
    )

    key: str | None = Field(
        default=None,
        max_length=317,
        description="Taint key to tolerate; empty with operator Exists tolerates every taint.",
    )
    operator: TolerationOperator | None = Field(
        default=None,
        description="Equal (default): the taint's value must equal value; Exists: any value.",
    )
    value: str | None = Field(
        default=None, max_length=63, description="Taint value to match (operator Equal only)."
    )
    effect: TaintEffect | None = Field(
        default=None, description="Taint effect to tolerate; empty tolerates every effect."
    )
    toleration_seconds: int | None = Field(
        default=None,
        description="With effect NoExecute: how long the pod stays on a node after the taint "
        "appears (default: for ever).",
    )


SelectorOperator = Literal["In", "NotIn", "Exists", "DoesNotExist"]
NodeOperator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
_VALUES_RULE = (
    "self.operator in ['Exists', 'DoesNotExist'] ? !has(self.values) || size(self.values) == 0"
    " : has(self.values) && size(self.values) > 0",
    "In, NotIn, Gt and Lt need values; Exists and DoesNotExist take none",
)
Values = list[Annotated[str, Field(max_length=NAME_MAX)]]


class LabelSelectorRequirement(CRDModel):
    """One test of a label: key, operator and values."""

    model_config = ConfigDict(json_schema_extra=cel(_VALUES_RULE))

    key: Key = Field(description="Label key the test reads.")
    operator: SelectorOperator = Field(
        description="In, NotIn (the value is, is not, one of values), Exists, DoesNotExist."
    )
    values: Values | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Values for In and NotIn; empty for Exists and DoesNotExist.",
    )


class LabelSelector(CRDModel):
    """Objects whose labels match every entry of matchLabels and every matchExpressions."""

    match_labels: dict[str, ShortText] | None = Field(
        default=None, max_length=LIST_MAX, description="Labels that must have these values."
    )
    match_expressions: list[LabelSelectorRequirement] | None = Field(
        default=None, max_length=LIST_MAX, description="Label tests that must all hold."
    )


class NodeSelectorRequirement(CRDModel):
    """One test of a node label (or field): key, operator and values."""

    model_config = ConfigDict(json_schema_extra=cel(_VALUES_RULE))

    key: Key = Field(description="Node label (or field) key the test reads.")
    operator: NodeOperator = Field(
        description="In, NotIn, Exists, DoesNotExist, or Gt and Lt (an integer comparison)."
    )
    values: Values | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Values for In and NotIn, one integer for Gt and Lt, none otherwise.",
    )


class NodeSelectorTerm(CRDModel):
    """Nodes matching every test of the term."""

    match_expressions: list[NodeSelectorRequirement] | None = Field(
        default=None, max_length=LIST_MAX, description="Tests of the node's labels."
    )
    match_fields: list[NodeSelectorRequirement] | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Tests of the node's fields (metadata.name only).",
    )


class NodeSelector(CRDModel):
    """Nodes matching any one of the terms."""

    node_selector_terms: list[NodeSelectorTerm] = Field(
        min_length=1, max_length=LIST_MAX, description="Terms, any one of which must match."
    )


class PreferredSchedulingTerm(CRDModel):
    """A node preference with its weight."""

    weight: int = Field(
        ge=1, le=100, description="Weight (1-100) added to a node's score when it matches."
    )
    preference: NodeSelectorTerm = Field(description="Nodes this preference favours.")


class NodeAffinity(CRDModel):
    """Which nodes the pods run on, by the nodes' labels."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = Field(
        default=None,
        description="Nodes the pods must run on; a pod no node matches stays Pending.",
    )
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = (
        Field(
            default=None,
            max_length=LIST_MAX,
            description="Nodes the scheduler prefers, by weight; others are still used.",
        )
    )


class PodAffinityTerm(CRDModel):
    """Pods (selected by labels) the pod runs near or away from, within a topology domain."""

    topology_key: str = Field(
        min_length=1,
        max_length=317,
        description="Node label whose value is the domain (kubernetes.io/hostname: a node; "
        "topology.kubernetes.io/zone: a zone).",
    )
    label_selector: LabelSelector | None = Field(
        default=None, description="The pods this term is about."
    )
    namespace_selector: LabelSelector | None = Field(
        default=None,
        description="Namespaces, by label, whose pods count (default: the pod's own).",
    )
    namespaces: list[Annotated[str, Field(max_length=NAME_MAX)]] | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Namespaces, by name, whose pods count (default: the pod's own).",
    )
    match_label_keys: list[Key] | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Label keys whose values, taken from the incoming pod, are added to "
        "labelSelector (e.g. pod-template-hash: only pods of the same rollout).",
    )
    mismatch_label_keys: list[Key] | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Label keys whose values, taken from the incoming pod, must differ.",
    )


class WeightedPodAffinityTerm(CRDModel):
    """A pod (anti-)affinity preference with its weight."""

    weight: int = Field(
        ge=1, le=100, description="Weight (1-100) added to a node's score when it matches."
    )
    pod_affinity_term: PodAffinityTerm = Field(description="The term this preference weighs.")


class PodAffinity(CRDModel):
    """Pods the pods run near (affinity) or away from (anti-affinity)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Terms that must all hold; a pod no node satisfies stays Pending.",
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = (
        Field(
            default=None,
            max_length=LIST_MAX,
            description="Terms the scheduler prefers, by weight.",
        )
    )


class Affinity(CRDModel):
    """Scheduling constraints by node labels and by the pods already running."""

    node_affinity: NodeAffinity | None = Field(
        default=None, description="Which nodes the pods run on, by node labels."
    )
    pod_affinity: PodAffinity | None = Field(
        default=None, description="Pods these pods run near (same node, same zone...)."
    )
    pod_anti_affinity: PodAffinity | None = Field(
        default=None,
        description="Pods these pods run away from (e.g. replicas on different nodes).",
    )


class TopologySpreadConstraint(CRDModel):
    """How evenly the pods spread over topology domains (nodes, zones)."""

    max_skew: int = Field(
        ge=1, description="Largest allowed difference in matching pods between two domains."
    )
    topology_key: str = Field(
        min_length=1,
        max_length=317,
        description="Node label whose value is the domain (e.g. topology.kubernetes.io/zone).",
    )
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = Field(
        description="DoNotSchedule: leave a pod Pending rather than exceed maxSkew; "
        "ScheduleAnyway: only prefer domains that reduce the skew."
    )
    label_selector: LabelSelector | None = Field(
        default=None, description="The pods counted in each domain."
    )
    min_domains: int | None = Field(
        default=None,
        ge=1,
        description="Domains to count as existing even when they have no node yet "
        "(DoNotSchedule only).",
    )
    node_affinity_policy: Literal["Honor", "Ignore"] | None = Field(
        default=None,
        description="Whether nodes outside the pod's node affinity count (Honor: not; default).",
    )
    node_taints_policy: Literal["Honor", "Ignore"] | None = Field(
        default=None,
        description="Whether tainted nodes the pod does not tolerate count (Ignore: they do; "
        "default).",
    )
    match_label_keys: list[Key] | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Label keys whose values, taken from the incoming pod, narrow "
        "labelSelector (e.g. pod-template-hash).",
    )
