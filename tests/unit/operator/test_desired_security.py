"""Security on: every Agent's identity, the callers files and the NetworkPolicies, as the
pure builders return them; security off: every desired object exactly as before."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kaos_agent.settings import AgentSettings
from kaos_core.auth import names as auth
from kaos_core.auth.callers import Callers
from kaos_operator.desired import (
    AgentContext,
    McpContext,
    MemoryStoreContext,
    ModelAPIContext,
    desired_agent_objects,
    desired_mcpserver_objects,
    desired_memorystore_objects,
    desired_modelapi_objects,
)
from kaos_operator.desired import security as sec
from kaos_operator.settings import Posture

from tests.support.operator_objects import (
    IMAGES,
    OPEN,
    SECURED,
    agent,
    by_kind,
    env_of,
    mcp_server,
    model_api,
    store,
)

GOLDEN = Path(__file__).parent / "data" / "desired_open.json"
REMOTE = {"type": "remote", "memoryStore": "mem"}
TOKENREVIEW = Posture(
    security_enabled=True,
    token_verification="tokenreview",
    service_account_issuer="https://oidc.example.test/cluster",
)


def agent_ctx(posture: Posture, **extra: Any) -> AgentContext:
    return AgentContext(
        images=IMAGES,
        posture=posture,
        model_api_url="http://llm.ns.svc:4000",
        model_name="m",
        memory_endpoint="http://mem.ns.svc:8080",
        **extra,
    )


def store_ctx(posture: Posture, **extra: Any) -> MemoryStoreContext:
    return MemoryStoreContext(
        images=IMAGES,
        posture=posture,
        model_api_url="http://llm.ns.svc:4000",
        summarization_model="m",
        embedding_model="m",
        **extra,
    )


def open_objects() -> dict[str, list[dict[str, Any]]]:
    """The same resources as the golden file, with security off."""
    a = agent(
        "a1",
        config={"memory": REMOTE},
        agentNetwork={"access": ["b"]},
        mcpServers=["tools"],
    )
    external = store(storage={"type": "external", "connectionSecret": {"name": "pg", "key": "dsn"}})
    return {
        "agent": desired_agent_objects(a, agent_ctx(OPEN)),
        "store": desired_memorystore_objects(store(), store_ctx(OPEN)),
        "store_ext": desired_memorystore_objects(external, store_ctx(OPEN)),
        "modelapi": desired_modelapi_objects(model_api(), ModelAPIContext(images=IMAGES)),
        "mcp": desired_mcpserver_objects(mcp_server(), McpContext(images=IMAGES)),
    }


def test_security_off_leaves_every_object_byte_identical() -> None:
    """The golden file was rendered by the builders before security existed (changed
    since only to put a store's claim before its Deployment, to give the agent's
    Deployment its task store, rollout and drain settings, every container a startup
    probe and a liveness timeout, and the memory service a preStop sleep); callers in a
    context are ignored with security off."""
    dumped = json.dumps(open_objects(), sort_keys=True, indent=1) + "\n"
    assert dumped == GOLDEN.read_text()
    with_callers = desired_agent_objects(agent(), agent_ctx(OPEN, callers=("x",)))
    assert [o["kind"] for o in with_callers] == ["Deployment", "Service"]


# -- who refers to whom -------------------------------------------------------------------


def test_referrers_are_computed_from_the_agents_and_stores() -> None:
    agents = [
        agent(
            "a",
            agentNetwork={"access": ["b", "c"]},
            mcpServers=["tools"],
            config={"memory": REMOTE},
        ),
        agent("c", agentNetwork={"access": ["b"]}, config={"memory": {**REMOTE, "type": "local"}}),
        agent("b", modelAPI="other", config={"memory": {**REMOTE, "enabled": False}}),
        agent("d", config={"memory": REMOTE}),
    ]
    assert sec.callers_of_agent("b", agents) == ["a", "c"]
    assert sec.callers_of_agent("a", agents) == []
    # Bound means remote memory on the store, enabled: c (local) and b (disabled) are not.
    assert sec.agents_bound_to("mem", agents) == ["a", "d"]
    assert sec.agents_using_mcp("tools", agents) == ["a"]
    assert sec.agents_using_model_api("llm", agents) == ["a", "c", "d"]
    stores = [
        store("mem"),
        store(
            "other-store",
            models={"summarization": {"modelAPI": "other"}, "embedding": {"modelAPI": "llm"}},
        ),
    ]
    assert sec.stores_using_model_api("llm", stores) == ["mem", "other-store"]
    assert sec.stores_using_model_api("other", stores) == ["other-store"]


# -- Agent --------------------------------------------------------------------------------


def test_secured_agent_runs_as_its_own_service_account_with_two_tokens() -> None:
    a = agent("a1", config={"memory": REMOTE})
    objects = by_kind(desired_agent_objects(a, agent_ctx(SECURED, callers=("c2", "c1"))))

    assert set(objects) == {"Deployment", "Service", "ServiceAccount", "ConfigMap", "NetworkPolicy"}
    sa = objects["ServiceAccount"]
    assert sa["metadata"]["name"] == "a1"
    assert sa["automountServiceAccountToken"] is False
    assert sa["metadata"]["ownerReferences"][0]["uid"] == "uid-a1"
    assert sa["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kaos-operator"

    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "a1"
    assert pod["automountServiceAccountToken"] is False
    assert pod["volumes"] == [
        {
            "name": "kaos-tokens",
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": auth.MEMORY_AUDIENCE,
                            "path": "memory/token",
                            "expirationSeconds": auth.TOKEN_EXPIRATION_SECONDS,
                        }
                    },
                    {
                        "serviceAccountToken": {
                            "audience": auth.AGENT_AUDIENCE,
                            "path": "agent/token",
                            "expirationSeconds": auth.TOKEN_EXPIRATION_SECONDS,
                        }
                    },
                    {
                        "serviceAccountToken": {
                            "audience": auth.MCP_AUDIENCE,
                            "path": "mcp/token",
                            "expirationSeconds": auth.TOKEN_EXPIRATION_SECONDS,
                        }
                    },
                    # The API server's own audience (none given) and the cluster CA: how
                    # the agent fetches the issuer's keys to verify delegating agents.
                    {
                        "serviceAccountToken": {
                            "path": "api/token",
                            "expirationSeconds": auth.TOKEN_EXPIRATION_SECONDS,
                        }
                    },
                    {
                        "configMap": {
                            "name": "kube-root-ca.crt",
                            "items": [{"key": "ca.crt", "path": "api/ca.crt"}],
                        }
                    },
                ]
            },
        },
        {"name": "kaos-callers", "configMap": {"name": "a1-callers"}},
    ]
    # The token paths under the mount are exactly the shared names.
    assert f"{auth.TOKEN_DIR}/memory/token" == auth.MEMORY_TOKEN_PATH
    assert f"{auth.TOKEN_DIR}/agent/token" == auth.AGENT_TOKEN_PATH
    assert f"{auth.TOKEN_DIR}/mcp/token" == auth.MCP_TOKEN_PATH
    assert f"{auth.TOKEN_DIR}/api/token" == auth.API_TOKEN_PATH
    assert f"{auth.TOKEN_DIR}/api/ca.crt" == auth.API_CA_PATH
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "kaos-tokens", "mountPath": auth.TOKEN_DIR, "readOnly": True},
        {"name": "kaos-callers", "mountPath": auth.CALLERS_DIR, "readOnly": True},
    ]
    env = env_of(objects["Deployment"])
    assert env[auth.AGENT_MEMORY_TOKEN_FILE] == auth.MEMORY_TOKEN_PATH
    assert env[auth.AGENT_PEER_TOKEN_FILE] == auth.AGENT_TOKEN_PATH
    assert env[auth.AGENT_MCP_TOKEN_FILE] == auth.MCP_TOKEN_PATH
    assert env[auth.AGENT_CALLERS_FILE] == auth.CALLERS_PATH
    # How it verifies the agents delegating to it: the posture's mode and issuer, through
    # the in-cluster API server with its projected API token and CA.
    assert env["AGENT_AUTH_MODE"] == "jwks"
    assert env["AGENT_AUTH_ISSUER"] == "https://kubernetes.default.svc.cluster.local"
    assert env["AGENT_AUTH_API_SERVER"] == "https://kubernetes.default.svc"
    assert env["AGENT_AUTH_CA_FILE"] == "/var/run/secrets/kaos/api/ca.crt"
    assert env["AGENT_AUTH_TOKEN_FILE"] == "/var/run/secrets/kaos/api/token"
    # What the operator writes is what the agent runtime accepts.
    # (The values: POD_NAME is the downward API's, resolved by the kubelet.)
    runtime = AgentSettings.from_env({k: v for k, v in env.items() if isinstance(v, str)})
    assert runtime.auth.mode == "jwks" and runtime.delegation.token_file is not None
    assert runtime.tools.token_file == Path(auth.MCP_TOKEN_PATH)

    cm = objects["ConfigMap"]
    assert cm["metadata"]["name"] == "a1-callers"
    doc = Callers.model_validate_json(cm["data"][auth.CALLERS_FILE])
    assert [(c.identity, c.namespace, c.service_account) for c in doc.callers] == [
        ("kaos://agent/ns/c1", "ns", "c1"),
        ("kaos://agent/ns/c2", "ns", "c2"),
    ]


def test_exposed_agent_is_open_on_its_port_and_a_closed_one_only_to_its_callers() -> None:
    exposed = by_kind(desired_agent_objects(agent("a1"), agent_ctx(SECURED, callers=("c1",))))
    policy = exposed["NetworkPolicy"]["spec"]
    assert policy["podSelector"] == {
        "matchLabels": {"app.kubernetes.io/name": "agent", "app.kubernetes.io/instance": "a1"}
    }
    # Egress too (``tests/unit/operator/test_desired_egress.py``).
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["ingress"] == [{"ports": [{"protocol": "TCP", "port": 8000}]}]

    closed_agent = agent("a1", agentNetwork={"expose": False})
    closed = by_kind(desired_agent_objects(closed_agent, agent_ctx(SECURED, callers=("c2", "c1"))))
    assert closed["NetworkPolicy"]["spec"]["ingress"] == [
        {
            "from": [
                {
                    "podSelector": {
                        "matchLabels": {"app.kubernetes.io/name": "agent"},
                        "matchExpressions": [
                            {
                                "key": "app.kubernetes.io/instance",
                                "operator": "In",
                                "values": ["c1", "c2"],
                            }
                        ],
                    }
                }
            ],
            "ports": [{"protocol": "TCP", "port": 8000}],
        }
    ]
    alone = by_kind(desired_agent_objects(closed_agent, agent_ctx(SECURED)))
    assert alone["NetworkPolicy"]["spec"]["ingress"] == []  # no caller: nobody
    assert Callers.model_validate_json(alone["ConfigMap"]["data"]["callers.json"]).callers == []


# -- MemoryStore --------------------------------------------------------------------------


def test_secured_store_mounts_its_callers_and_verifies_tokens_in_cluster() -> None:
    objects = by_kind(desired_memorystore_objects(store(), store_ctx(SECURED, callers=("a", "b"))))

    assert {"ConfigMap", "NetworkPolicy"} <= set(objects)
    dep = objects["Deployment"]
    env = env_of(dep)
    assert env[auth.MEMORY_CALLERS_FILE] == auth.CALLERS_PATH
    assert env["KAOS_MEMORY_AUTH_MODE"] == "jwks"
    assert env["KAOS_MEMORY_AUTH_ISSUER"] == "https://kubernetes.default.svc.cluster.local"
    assert env["KAOS_MEMORY_AUTH_API_SERVER"] == "https://kubernetes.default.svc"
    assert env["KAOS_MEMORY_AUTH_CA_FILE"] == (
        "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
    )
    assert env["KAOS_MEMORY_AUTH_TOKEN_FILE"] == (
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )
    pod = dep["spec"]["template"]["spec"]
    # Its own default token stays: it is how the pod reaches the issuer or TokenReview.
    assert "serviceAccountName" not in pod and "automountServiceAccountToken" not in pod
    assert {"name": "kaos-callers", "configMap": {"name": "mem-callers"}} in pod["volumes"]
    assert {
        "name": "kaos-callers",
        "mountPath": auth.CALLERS_DIR,
        "readOnly": True,
    } in pod["containers"][0]["volumeMounts"]

    doc = Callers.model_validate_json(objects["ConfigMap"]["data"]["callers.json"])
    assert [c.identity for c in doc.callers] == ["kaos://agent/ns/a", "kaos://agent/ns/b"]
    rule = objects["NetworkPolicy"]["spec"]["ingress"][0]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8080}]
    assert rule["from"][0]["podSelector"]["matchExpressions"][0]["values"] == ["a", "b"]


def test_secured_store_knows_itself_for_admin_reviews() -> None:
    # Admin calls are authorised on memorystores/data of this very store (namespace and
    # name), through the same API server and credentials as token verification.
    secured = env_of(
        by_kind(desired_memorystore_objects(store(), store_ctx(SECURED)))["Deployment"]
    )
    assert secured[auth.MEMORY_STORE_NAMESPACE] == "ns"
    assert secured[auth.MEMORY_STORE_NAME] == "mem"
    assert secured["KAOS_MEMORY_AUTH_API_SERVER"] == "https://kubernetes.default.svc"
    tokenreview = env_of(
        by_kind(desired_memorystore_objects(store(), store_ctx(TOKENREVIEW)))["Deployment"]
    )
    assert tokenreview[auth.MEMORY_STORE_NAME] == "mem"
    # Security off: the trusted-header posture, no admin review, nothing new in the pod.
    open_env = env_of(by_kind(desired_memorystore_objects(store(), store_ctx(OPEN)))["Deployment"])
    assert auth.MEMORY_STORE_NAMESPACE not in open_env and auth.MEMORY_STORE_NAME not in open_env


def test_store_auth_follows_the_posture() -> None:
    env = env_of(
        by_kind(desired_memorystore_objects(store(), store_ctx(TOKENREVIEW)))["Deployment"]
    )
    assert env["KAOS_MEMORY_AUTH_MODE"] == "tokenreview"
    assert env["KAOS_MEMORY_AUTH_ISSUER"] == "https://oidc.example.test/cluster"


def test_agent_auth_follows_the_posture() -> None:
    env = env_of(by_kind(desired_agent_objects(agent("a1"), agent_ctx(TOKENREVIEW)))["Deployment"])
    assert env["AGENT_AUTH_MODE"] == "tokenreview"
    assert env["AGENT_AUTH_ISSUER"] == "https://oidc.example.test/cluster"
    assert env["AGENT_AUTH_API_SERVER"] == "https://kubernetes.default.svc"


def test_user_identity_is_projected_into_agents_and_stores() -> None:
    users = Posture(
        security_enabled=True,
        user_issuer="https://idp.example.test/realms/kaos",
        user_audience="kaos-gateway",
        user_principal_claim="email",
        user_jwks_url="https://idp.example.test/keys",
        user_authorized_party="kaos-console",
    )
    agent_env = env_of(by_kind(desired_agent_objects(agent("a1"), agent_ctx(users)))["Deployment"])
    store_env = env_of(
        by_kind(desired_memorystore_objects(store(), store_ctx(users)))["Deployment"]
    )
    for env, prefix in ((agent_env, "AGENT_USER_"), (store_env, "KAOS_MEMORY_USER_")):
        assert env[prefix + "ISSUER"] == "https://idp.example.test/realms/kaos"
        assert env[prefix + "AUDIENCE"] == "kaos-gateway"
        assert env[prefix + "PRINCIPAL_CLAIM"] == "email"
        assert env[prefix + "JWKS_URL"] == "https://idp.example.test/keys"
        assert env[prefix + "AUTHORIZED_PARTY"] == "kaos-console"
    # Every variable the operator sets is one the runtime reads, and it loads.
    assert set(sec.AGENT_USER_VARIABLES.values()) <= set(agent_env)
    # Security without a user issuer: no user variable at all.
    secured = env_of(by_kind(desired_agent_objects(agent("a1"), agent_ctx(SECURED)))["Deployment"])
    assert not [k for k in secured if k.startswith("AGENT_USER_")]


# -- MCPServer and ModelAPI ---------------------------------------------------------------


def test_mcp_and_model_api_admit_only_their_users() -> None:
    mcp = by_kind(
        desired_mcpserver_objects(
            mcp_server(), McpContext(images=IMAGES, posture=SECURED, clients=("a",))
        )
    )
    assert mcp["NetworkPolicy"]["spec"]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "mcpserver",
        "app.kubernetes.io/instance": "tools",
    }
    assert mcp["NetworkPolicy"]["spec"]["ingress"][0]["ports"][0]["port"] == 8000

    ctx = ModelAPIContext(
        images=IMAGES, posture=SECURED, agent_clients=("a", "b"), store_clients=("mem",)
    )
    hosted = model_api(mode="Hosted", serverConfig={"model": "smollm2:135m"})
    for api, port in ((model_api(), 4000), (hosted, 11434)):
        policy = by_kind(desired_modelapi_objects(api, ctx))["NetworkPolicy"]["spec"]
        (rule,) = policy["ingress"]
        assert rule["ports"] == [{"protocol": "TCP", "port": port}]
        admitted = {
            p["podSelector"]["matchLabels"]["app.kubernetes.io/name"]: p["podSelector"][
                "matchExpressions"
            ][0]["values"]
            for p in rule["from"]
        }
        assert admitted == {"agent": ["a", "b"], "memorystore": ["mem"]}

    unused = by_kind(desired_modelapi_objects(model_api(), ModelAPIContext(IMAGES, SECURED)))
    assert unused["NetworkPolicy"]["spec"]["ingress"] == []
