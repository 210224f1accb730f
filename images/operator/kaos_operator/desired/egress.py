"""Egress of the NetworkPolicies security on adds: where each kind's pods may connect.

``security.network_policy`` says who may connect *to* a resource's pods; ``with_egress``
adds where those pods may connect *to*, and makes the policy deny every other connection
they open (``policyTypes`` gains ``Egress``). Every pod may resolve names (the cluster DNS:
``kube-system`` pods labelled ``k8s-app: kube-dns``, which CoreDNS keeps for compatibility,
UDP and TCP 53) and reach the posture's ``clusterEgress`` blocks (the API server its token
verification needs, a tracing collector). Beyond that:

=============  =================================================================
Agent          its ModelAPI's pods, its MCP servers' pods, its MemoryStore's pods
               (remote memory, port 8080), the pods of the Agents in its
               ``agentNetwork.access`` (port 8000); ``taskStore.egress`` (an
               external task store: its database)
MemoryStore    the pods of its summarisation and embedding ModelAPIs; ``spec.egress``
               (storage external: its database)
MCPServer      ``spec.egress`` (the APIs its tools call)
ModelAPI       ``spec.egress`` (Proxy: its provider; Hosted: its model registry)
=============  =================================================================

Pods of another resource are selected by their pod labels and, where the port is fixed
(an Agent's, a MemoryStore's), on that port; a ModelAPI's and an MCP server's port depend on
their mode and runtime, and their own ingress rule admits only that one. Everything here is
derived from the resource's own spec and the posture, so a changed reference changes the
policy at the next reconcile of the resource that holds it, without restarting a pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kaos_core.crds.agent import Agent
from kaos_core.crds.egress import EgressRule
from kaos_core.crds.memorystore import MemoryStore

from kaos_operator.desired.common import AGENT_PORT, MEMORY_PORT, Obj, component_of
from kaos_operator.settings import Posture

# The cluster DNS as kubeadm, kind and most distributions deploy it.
DNS_NAMESPACE = "kube-system"
DNS_POD_LABELS = {"k8s-app": "kube-dns"}
DNS_PORT = 53
NAMESPACE_LABEL = "kubernetes.io/metadata.name"
# The pods of the operator, in the namespace of its ServiceAccount (the chart's label).
OPERATOR_POD_LABELS = {"app.kubernetes.io/component": "operator"}


def dns_rule() -> Obj:
    return {
        "to": [
            {
                "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: DNS_NAMESPACE}},
                "podSelector": {"matchLabels": dict(DNS_POD_LABELS)},
            }
        ],
        "ports": [
            {"protocol": "UDP", "port": DNS_PORT},
            {"protocol": "TCP", "port": DNS_PORT},
        ],
    }


def pods_rule(kind: str, names: Iterable[str], port: int | None) -> Obj | None:
    """Connections to the pods of the named resources of one kind (on ``port``, or any);
    ``None`` for no name."""
    chosen = sorted(set(names))
    if not chosen:
        return None
    rule: Obj = {
        "to": [
            {
                "podSelector": {
                    "matchLabels": {"app.kubernetes.io/name": component_of(kind)},
                    "matchExpressions": [
                        {"key": "app.kubernetes.io/instance", "operator": "In", "values": chosen}
                    ],
                }
            }
        ]
    }
    if port is not None:
        rule["ports"] = [{"protocol": "TCP", "port": port}]
    return rule


def block_rule(entry: EgressRule) -> Obj:
    """Connections to an address block, on its ports or on all."""
    rule: Obj = {"to": [{"ipBlock": {"cidr": entry.cidr}}]}
    if entry.ports:
        rule["ports"] = [{"protocol": p.protocol, "port": p.port} for p in entry.ports]
    return rule


def egress_rules(
    posture: Posture, pods: Sequence[Obj | None] = (), blocks: Sequence[EgressRule] = ()
) -> list[Obj]:
    """DNS, then ``pods``, then the resource's blocks and the posture's, in that order."""
    rules = [dns_rule(), *(r for r in pods if r is not None)]
    rules += [block_rule(e) for e in (*blocks, *posture.egress)]
    return rules


def with_egress(policy: Obj, rules: list[Obj]) -> Obj:
    """``policy`` that also denies its pods every connection ``rules`` do not allow."""
    spec = {**policy["spec"], "policyTypes": ["Ingress", "Egress"], "egress": rules}
    return {**policy, "spec": spec}


def agent_egress(agent: Agent, posture: Posture) -> list[Obj]:
    spec = agent.spec
    memory = spec.config.memory
    store = memory.memory_store if memory.enabled and memory.type == "remote" else None
    pods = [
        pods_rule("ModelAPI", [spec.model_api], None),
        pods_rule("MCPServer", spec.mcp_servers, None),
        pods_rule("MemoryStore", [store] if store else [], MEMORY_PORT),
        pods_rule("Agent", spec.agent_network.access, AGENT_PORT),
    ]
    tasks = spec.task_store
    blocks = tasks.egress if tasks is not None and tasks.type == "external" else []
    return egress_rules(posture, pods, blocks)


def memory_store_egress(store: MemoryStore, posture: Posture) -> list[Obj]:
    models = store.spec.models
    apis = [models.summarization.model_api, models.embedding.model_api]
    return egress_rules(posture, [pods_rule("ModelAPI", apis, None)], store.spec.egress)


def own_egress(blocks: Sequence[EgressRule], posture: Posture) -> list[Obj]:
    """An MCPServer's or a ModelAPI's: DNS, its ``spec.egress``, the posture's."""
    return egress_rules(posture, (), blocks)


def operator_peer(posture: Posture) -> Obj | None:
    """The operator's pods as an ingress peer (they list MCP servers' tools, read ModelAPIs'
    capabilities and MemoryStores' receipt keys); ``None`` when the posture does not name
    the operator's ServiceAccount."""
    account = posture.operator_account
    if account is None:
        return None
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_LABEL: account[0]}},
        "podSelector": {"matchLabels": dict(OPERATOR_POD_LABELS)},
    }


def admitting(policy: Obj, port: int, peer: Obj | None) -> Obj:
    """``policy`` whose ingress also admits ``peer`` on ``port`` (unchanged for ``None``,
    and when it already admits anyone)."""
    if peer is None:
        return policy
    rules: list[Obj] = list(policy["spec"].get("ingress") or [])
    if rules and "from" not in rules[0]:
        return policy
    if rules:
        rules[0] = {**rules[0], "from": [*rules[0]["from"], peer]}
    else:
        rules = [{"from": [peer], "ports": [{"protocol": "TCP", "port": port}]}]
    return {**policy, "spec": {**policy["spec"], "ingress": rules}}
