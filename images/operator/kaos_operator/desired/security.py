"""What security on adds to the desired objects: identities, callers files, NetworkPolicies.

Everything here is used only when the posture enables security; with it off no object
changes (the builders of each kind skip these pieces entirely).

- **Identity.** Every Agent runs as its own ServiceAccount (named after the Agent, owned
  by it, with no automounted API token). Its pod gets projected, audience-bound,
  expiring tokens instead, one per kind of service it calls (``kaos_core.auth.names``),
  and a third one for the API server with the cluster CA: an agent verifies the tokens of
  the agents delegating to it, and that needs the issuer's keys (``jwks``, from the API
  server's ``/openid/v1/jwks``, which needs an authenticated caller on a default cluster)
  or TokenReviews (``tokenreview``, for which the Agent's ServiceAccount needs ``create``
  on tokenreviews: the chart binds it to the namespace's ServiceAccounts group; the
  operator holds no RBAC rights, so it cannot grant any). The token carries
  only what the ServiceAccount is granted: nothing beyond discovery unless someone binds
  more to it.
- **Callers files.** A MemoryStore's ConfigMap lists the Agents bound to it; an Agent's
  lists the Agents whose ``agentNetwork.access`` names it. The services verify a
  presented token and then look its ServiceAccount up there (``kaos_core.auth.callers``).
- **NetworkPolicies** (ingress on the service's one port; egress: ``egress``) say the same
  at the network layer, by the pod labels the operator puts on each kind's pods:

  =============  ===============================================================
  MemoryStore    from the pods of the Agents bound to it (remote memory on it), and
                 the operator's (the receipt key)
  Agent          from the pods of its callers; from anywhere when it is exposed
  MCPServer      from the pods of the Agents that list it in ``mcpServers``, and the
                 operator's (it lists the tools)
  ModelAPI       from the pods of the Agents and MemoryStores that use it, and the
                 operator's (the models' capabilities)
  =============  ===============================================================

  ``agentNetwork.expose`` ("other agents may delegate to this one") keeps an Agent a
  service: its chat and A2A endpoints stay reachable from any pod (users' clients,
  gateways, ingress controllers), and which agent may *delegate* is decided by the
  verified token against its callers file, not by the network. A closed Agent
  (``expose: false``) accepts connections only from the pods of the Agents naming it
  in ``access``. Labels are not identities (any pod in the namespace can carry them):
  the policies narrow the network, the tokens are what is verified.

Only Agents of the resource's own namespace are ever listed: references are namespaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kaos_core.auth import names as auth
from kaos_core.auth.callers import Caller, Callers
from kaos_core.crds.agent import Agent
from kaos_core.crds.common import CustomObject
from kaos_core.crds.memorystore import MemoryStore
from kaos_core.wire import agent_identity

from kaos_operator.desired.common import Obj, component_of, metadata, selector_labels
from kaos_operator.settings import Posture

TOKENS_VOLUME = "kaos-tokens"
CALLERS_VOLUME = "kaos-callers"

# -- who refers to whom -------------------------------------------------------------------


def agent_service_account(agent_name: str) -> str:
    """The ServiceAccount an Agent runs as: its own name (one identity per Agent)."""
    return agent_name


def bound_to_store(agent: Agent, store_name: str) -> bool:
    """The agent uses ``store_name`` as its remote memory (what the store must accept)."""
    memory = agent.spec.config.memory
    return memory.enabled and memory.type == "remote" and memory.memory_store == store_name


def agents_bound_to(store_name: str, agents: Iterable[Agent]) -> list[str]:
    return sorted(a.name for a in agents if bound_to_store(a, store_name))


def callers_of_agent(agent_name: str, agents: Iterable[Agent]) -> list[str]:
    """The Agents whose ``agentNetwork.access`` names ``agent_name``."""
    return sorted(a.name for a in agents if agent_name in a.spec.agent_network.access)


def agents_using_mcp(server_name: str, agents: Iterable[Agent]) -> list[str]:
    return sorted(a.name for a in agents if server_name in a.spec.mcp_servers)


def agents_using_model_api(api_name: str, agents: Iterable[Agent]) -> list[str]:
    return sorted(a.name for a in agents if a.spec.model_api == api_name)


def stores_using_model_api(api_name: str, stores: Iterable[MemoryStore]) -> list[str]:
    return sorted(
        s.name
        for s in stores
        if api_name in (s.spec.models.summarization.model_api, s.spec.models.embedding.model_api)
    )


# -- objects ------------------------------------------------------------------------------


def callers_config_map_name(owner_name: str) -> str:
    return f"{owner_name}-callers"


def callers(namespace: str, agent_names: Iterable[str]) -> Callers:
    return Callers(
        callers=[
            Caller(
                identity=agent_identity(namespace, name),
                namespace=namespace,
                serviceAccount=agent_service_account(name),
            )
            for name in agent_names
        ]
    )


def callers_config_map(owner: CustomObject, agent_names: Iterable[str]) -> Obj:
    """The callers file of ``owner``; mounted without subPath so kubelet updates it live."""
    doc = callers(owner.namespace, agent_names)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(owner, callers_config_map_name(owner.name)),
        "data": {auth.CALLERS_FILE: doc.to_json()},
    }


def service_account(agent: Agent) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(agent, agent_service_account(agent.name)),
        # The pod mounts its tokens explicitly (``token_volume``), never the default mount.
        "automountServiceAccountToken": False,
    }


def _pods_of(kind: str, names: Sequence[str]) -> Obj:
    """A peer selecting the pods of the named resources of one kind (their pod labels)."""
    return {
        "podSelector": {
            "matchLabels": {"app.kubernetes.io/name": component_of(kind)},
            "matchExpressions": [
                {"key": "app.kubernetes.io/instance", "operator": "In", "values": list(names)}
            ],
        }
    }


def network_policy(
    owner: CustomObject,
    port: int,
    sources: Mapping[str, Sequence[str]],
    *,
    from_anywhere: bool = False,
) -> Obj:
    """Ingress to ``owner``'s pods on ``port`` only from the pods of ``sources``
    (kind -> resource names), or from anywhere; no source at all denies all ingress."""
    ports = [{"protocol": "TCP", "port": port}]
    ingress: list[Obj]
    if from_anywhere:
        ingress = [{"ports": ports}]
    else:
        peers = [_pods_of(kind, sorted(n)) for kind, n in sorted(sources.items()) if n]
        ingress = [{"from": peers, "ports": ports}] if peers else []
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": metadata(owner),
        "spec": {
            "podSelector": {"matchLabels": selector_labels(owner)},
            "policyTypes": ["Ingress"],
            "ingress": ingress,
        },
    }


def admit(policy: Obj, peer: Obj, port: int) -> Obj:
    """``policy`` with one more ingress rule: from ``peer`` (a NetworkPolicy peer) on
    ``port``."""
    rule = {"from": [peer], "ports": [{"protocol": "TCP", "port": port}]}
    spec = policy["spec"]
    return {**policy, "spec": {**spec, "ingress": [*spec["ingress"], rule]}}


# -- pod pieces ---------------------------------------------------------------------------


def token_volume() -> Obj:
    """The Agent's tokens, kubelet rotates them before they expire: one per audience of the
    services it calls, one for the API server (no audience: the API server's own) with the
    cluster CA beside it, for verifying the agents that delegate to it."""

    def token(audience: str | None, path: str) -> Obj:
        source: Obj = {"path": path, "expirationSeconds": auth.TOKEN_EXPIRATION_SECONDS}
        if audience is not None:
            source = {"audience": audience, **source}
        return {"serviceAccountToken": source}

    prefix = auth.TOKEN_DIR + "/"
    ca = {
        "configMap": {
            "name": auth.KUBE_ROOT_CA_CONFIG_MAP,
            "items": [{"key": "ca.crt", "path": auth.API_CA_PATH.removeprefix(prefix)}],
        }
    }
    return {
        "name": TOKENS_VOLUME,
        "projected": {
            "sources": [
                token(auth.MEMORY_AUDIENCE, auth.MEMORY_TOKEN_PATH.removeprefix(prefix)),
                token(auth.AGENT_AUDIENCE, auth.AGENT_TOKEN_PATH.removeprefix(prefix)),
                token(auth.MCP_AUDIENCE, auth.MCP_TOKEN_PATH.removeprefix(prefix)),
                token(None, auth.API_TOKEN_PATH.removeprefix(prefix)),
                ca,
            ]
        },
    }


def token_mount() -> Obj:
    return {"name": TOKENS_VOLUME, "mountPath": auth.TOKEN_DIR, "readOnly": True}


def callers_volume(owner_name: str) -> Obj:
    return {"name": CALLERS_VOLUME, "configMap": {"name": callers_config_map_name(owner_name)}}


def callers_mount() -> Obj:
    return {"name": CALLERS_VOLUME, "mountPath": auth.CALLERS_DIR, "readOnly": True}


def agent_security_env(posture: Posture) -> dict[str, str]:
    """Where the agent finds its tokens and its callers file (pod paths), and how it
    verifies the agents delegating to it: the posture's mode and issuer, through the
    in-cluster API server with its projected API token and CA (``token_volume``)."""
    env = {
        auth.AGENT_MEMORY_TOKEN_FILE: auth.MEMORY_TOKEN_PATH,
        auth.AGENT_PEER_TOKEN_FILE: auth.AGENT_TOKEN_PATH,
        auth.AGENT_MCP_TOKEN_FILE: auth.MCP_TOKEN_PATH,
        auth.AGENT_CALLERS_FILE: auth.CALLERS_PATH,
        auth.AGENT_AUTH_MODE: posture.token_verification,
        auth.AGENT_AUTH_ISSUER: posture.service_account_issuer,
        auth.AGENT_AUTH_API_SERVER: auth.IN_CLUSTER_API_SERVER,
        auth.AGENT_AUTH_CA_FILE: auth.API_CA_PATH,
        auth.AGENT_AUTH_TOKEN_FILE: auth.API_TOKEN_PATH,
    } | user_identity_env(posture, AGENT_USER_VARIABLES)
    return env | user_rbac_env(posture)


def user_rbac_env(posture: Posture) -> dict[str, str]:
    """Who may talk to the agent (``kaos_core.auth.invoke``): Kubernetes RBAC asked about
    each verified user, through the API server and credentials of ``agent_security_env``
    (the Agent's ServiceAccount needs ``create`` on subjectaccessreviews: the chart's
    ``<release>-agent-review``). Empty unless the posture has users and ``user_rbac`` (on
    by default: a verified user nobody granted is refused)."""
    if not posture.user_identity or not posture.user_rbac:
        return {}
    env = {
        auth.AGENT_RBAC: "true",
        auth.AGENT_RBAC_USERNAME_CLAIM: posture.user_username_claim,
    }
    optional = {
        auth.AGENT_RBAC_USERNAME_PREFIX: posture.user_username_prefix,
        auth.AGENT_RBAC_GROUPS_CLAIM: posture.user_groups_claim,
        auth.AGENT_RBAC_GROUPS_PREFIX: posture.user_groups_prefix,
    }
    return env | {name: value for name, value in optional.items() if value}


def user_identity_env(posture: Posture, variables: Mapping[str, str]) -> dict[str, str]:
    """The user issuer settings of verified user identity (empty without one), under the
    names in ``variables`` (issuer, audience, claim, jwks, azp): the agent's or the memory's.

    A per-agent audience goes out as its template: each agent renders its own from the
    identity it is given (``AGENT_IDENTITY``) and needs the template's form anyway for the
    tokens delegations forward, as the memory service does (``kaos_core.auth.config``)."""
    if not posture.user_identity or posture.user_issuer is None:
        return {}
    env = {
        variables["issuer"]: posture.user_issuer,
        variables["audience"]: posture.user_audience,
        variables["claim"]: posture.user_principal_claim,
    }
    if posture.user_jwks_url:
        env[variables["jwks"]] = posture.user_jwks_url
    if posture.user_authorized_party:
        env[variables["azp"]] = posture.user_authorized_party
    return env


AGENT_USER_VARIABLES = {
    "issuer": auth.AGENT_USER_ISSUER,
    "audience": auth.AGENT_USER_AUDIENCE,
    "claim": auth.AGENT_USER_PRINCIPAL_CLAIM,
    "jwks": auth.AGENT_USER_JWKS_URL,
    "azp": auth.AGENT_USER_AUTHORIZED_PARTY,
}
MEMORY_USER_VARIABLES = {
    "issuer": auth.MEMORY_USER_ISSUER,
    "audience": auth.MEMORY_USER_AUDIENCE,
    "claim": auth.MEMORY_USER_PRINCIPAL_CLAIM,
    "jwks": auth.MEMORY_USER_JWKS_URL,
    "azp": auth.MEMORY_USER_AUTHORIZED_PARTY,
}


def memory_admin_env(store: MemoryStore) -> dict[str, str]:
    """The store admin calls are authorised on: a SubjectAccessReview of ``get``/``delete``
    on ``memorystores/data`` of this namespace and name (through the same API server and
    credentials as ``memory_security_env``; the pod's ServiceAccount needs ``create`` on
    tokenreviews and subjectaccessreviews: the chart's ``<release>-memory-review``)."""
    return {auth.MEMORY_STORE_NAMESPACE: store.namespace, auth.MEMORY_STORE_NAME: store.name}


def memory_security_env(posture: Posture) -> dict[str, str]:
    """How the memory pod verifies tokens: the posture's mode and issuer, through the
    in-cluster API server with the pod's own (default, automounted) credentials."""
    return {
        auth.MEMORY_CALLERS_FILE: auth.CALLERS_PATH,
        auth.MEMORY_AUTH_MODE: posture.token_verification,
        auth.MEMORY_AUTH_ISSUER: posture.service_account_issuer,
        auth.MEMORY_AUTH_API_SERVER: auth.IN_CLUSTER_API_SERVER,
        auth.MEMORY_AUTH_CA_FILE: auth.IN_CLUSTER_CA_FILE,
        auth.MEMORY_AUTH_TOKEN_FILE: auth.IN_CLUSTER_TOKEN_FILE,
    } | user_identity_env(posture, MEMORY_USER_VARIABLES)
