"""Security on: each kind's NetworkPolicy denies egress but for DNS, the resources it
references, its own ``spec.egress`` and the posture's ``clusterEgress``, as the pure
builders return them; MCP servers admit the operator's pods and verify their callers."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_agent.mcp_runtime.settings import McpSettings
from kaos_core.auth import names as auth
from kaos_core.crds.egress import cluster_egress
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
from kaos_operator.settings import McpRuntime, OperatorSettings, Posture
from pydantic import ValidationError

from tests.support.operator_objects import (
    IMAGES,
    SECURED,
    agent,
    by_kind,
    env_of,
    hosted_api,
    mcp_server,
    model_api,
    store,
)

DNS = {
    "to": [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ],
    "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
}
WITH_CLUSTER = Posture(
    security_enabled=True,
    cluster_egress="172.18.0.2/32:6443,10.20.0.0/16",
    operator_service_account="kaos-system/kaos-operator",
)
API_SERVER = {
    "to": [{"ipBlock": {"cidr": "172.18.0.2/32"}}],
    "ports": [{"protocol": "TCP", "port": 6443}],
}
COLLECTORS = {"to": [{"ipBlock": {"cidr": "10.20.0.0/16"}}]}
# The operator's pods, in the namespace of its ServiceAccount.
OPERATOR = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kaos-system"}},
    "podSelector": {"matchLabels": {"app.kubernetes.io/component": "operator"}},
}
PORT_4000 = {"protocol": "TCP", "port": 4000}


def pods(component: str, names: list[str], port: int | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "to": [
            {
                "podSelector": {
                    "matchLabels": {"app.kubernetes.io/name": component},
                    "matchExpressions": [
                        {"key": "app.kubernetes.io/instance", "operator": "In", "values": names}
                    ],
                }
            }
        ]
    }
    if port is not None:
        rule["ports"] = [{"protocol": "TCP", "port": port}]
    return rule


def agent_policy(posture: Posture, **spec: Any) -> dict[str, Any]:
    ctx = AgentContext(
        images=IMAGES,
        posture=posture,
        model_api_url="http://llm.ns.svc:4000",
        model_name="m",
        memory_endpoint="http://mem.ns.svc:8080",
    )
    return dict(by_kind(desired_agent_objects(agent("a1", **spec), ctx))["NetworkPolicy"]["spec"])


def store_policy(posture: Posture, **spec: Any) -> dict[str, Any]:
    ctx = MemoryStoreContext(
        images=IMAGES,
        posture=posture,
        model_api_url="http://llm.ns.svc:4000",
        summarization_model="m",
        embedding_model="m",
    )
    objects = desired_memorystore_objects(store(**spec), ctx)
    return dict(by_kind(objects)["NetworkPolicy"]["spec"])


# -- Agent --------------------------------------------------------------------------------


def test_an_agent_may_reach_dns_its_model_tools_store_and_peers_only() -> None:
    policy = agent_policy(
        SECURED,
        mcpServers=["tools", "search"],
        agentNetwork={"access": ["researcher", "writer"]},
        config={"memory": {"type": "remote", "memoryStore": "mem"}},
    )
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["egress"] == [
        DNS,
        pods("modelapi", ["llm"]),
        pods("mcpserver", ["search", "tools"]),
        pods("memorystore", ["mem"], 8080),
        pods("agent", ["researcher", "writer"], 8000),
    ]


def test_an_agent_without_references_may_reach_dns_and_its_model_only() -> None:
    # Local memory is in the pod: no store to reach.
    policy = agent_policy(SECURED, config={"memory": {"type": "local"}})
    assert policy["egress"] == [DNS, pods("modelapi", ["llm"])]


def test_an_agent_reaches_its_external_task_stores_database_and_nothing_else() -> None:
    database = {"cidr": "10.20.0.5/32", "ports": [{"port": 5432}]}
    policy = agent_policy(
        SECURED,
        taskStore={"type": "external", "connectionSecret": {"name": "pg"}, "egress": [database]},
    )
    block = {
        "to": [{"ipBlock": {"cidr": "10.20.0.5/32"}}],
        "ports": [{"protocol": "TCP", "port": 5432}],
    }
    assert policy["egress"] == [DNS, pods("modelapi", ["llm"]), block]
    # The same list on a store of another type (the schema refuses it) opens nothing.
    local = agent_policy(SECURED, taskStore={"type": "local", "egress": [database]})
    assert local["egress"] == [DNS, pods("modelapi", ["llm"])]


def test_the_posture_blocks_come_last_for_every_kind() -> None:
    policy = agent_policy(WITH_CLUSTER)
    assert policy["egress"] == [DNS, pods("modelapi", ["llm"]), API_SERVER, COLLECTORS]


# -- MemoryStore --------------------------------------------------------------------------


def test_a_store_may_reach_its_model_apis_and_its_listed_database() -> None:
    external = {"type": "external", "connectionSecret": {"name": "pg", "key": "dsn"}}
    policy = store_policy(
        SECURED,
        storage=external,
        models={"summarization": {"modelAPI": "llm"}, "embedding": {"modelAPI": "embedder"}},
        egress=[{"cidr": "10.9.0.7/32", "ports": [{"port": 5432}]}],
    )
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["egress"] == [
        DNS,
        pods("modelapi", ["embedder", "llm"]),
        {
            "to": [{"ipBlock": {"cidr": "10.9.0.7/32"}}],
            "ports": [{"protocol": "TCP", "port": 5432}],
        },
    ]


def test_a_local_store_without_egress_reaches_its_model_api_only() -> None:
    assert store_policy(SECURED)["egress"] == [DNS, pods("modelapi", ["llm"])]


def test_a_store_admits_the_operator_when_its_account_is_named() -> None:
    # No bound agent: the operator alone (it reads the receipt key).
    assert store_policy(WITH_CLUSTER)["ingress"] == [
        {"from": [OPERATOR], "ports": [{"protocol": "TCP", "port": 8080}]}
    ]
    assert store_policy(SECURED)["ingress"] == []


# -- ModelAPI and MCPServer ---------------------------------------------------------------


def test_a_proxy_model_api_reaches_only_the_provider_it_lists() -> None:
    api = model_api(
        mode="Proxy",
        proxyConfig={"models": ["openai/gpt-4o-mini"]},
        egress=[{"cidr": "0.0.0.0/0", "ports": [{"port": 443}]}],
    )
    ctx = ModelAPIContext(images=IMAGES, posture=WITH_CLUSTER, agent_clients=("a1",))
    policy = by_kind(desired_modelapi_objects(api, ctx))["NetworkPolicy"]["spec"]
    # The operator reads its models' capabilities.
    assert policy["ingress"] == [
        {"from": [pods("agent", ["a1"])["to"][0], OPERATOR], "ports": [PORT_4000]}
    ]
    assert policy["egress"] == [
        DNS,
        {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 443}]},
        API_SERVER,
        COLLECTORS,
    ]


def test_a_hosted_model_api_without_egress_reaches_dns_only() -> None:
    objects = desired_modelapi_objects(
        hosted_api(), ModelAPIContext(images=IMAGES, posture=SECURED)
    )
    policy = by_kind(objects)["NetworkPolicy"]["spec"]
    assert policy["policyTypes"] == ["Ingress", "Egress"]
    assert policy["egress"] == [DNS]


def test_an_mcp_server_admits_its_agents_and_the_operator_and_reaches_its_list() -> None:
    server = mcp_server(
        params="def up(x: str) -> str:\n    return x.upper()\n",
        egress=[
            {"cidr": "198.51.100.0/24", "ports": [{"port": 443}, {"port": 53, "protocol": "UDP"}]}
        ],
    )
    ctx = McpContext(images=IMAGES, posture=WITH_CLUSTER, clients=("a1",))
    policy = by_kind(desired_mcpserver_objects(server, ctx))["NetworkPolicy"]["spec"]
    assert policy["ingress"] == [
        {
            "from": [pods("agent", ["a1"])["to"][0], OPERATOR],
            "ports": [{"protocol": "TCP", "port": 8000}],
        }
    ]
    assert policy["egress"] == [
        DNS,
        {
            "to": [{"ipBlock": {"cidr": "198.51.100.0/24"}}],
            "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "UDP", "port": 53}],
        },
        API_SERVER,
        COLLECTORS,
    ]


def test_an_mcp_server_nobody_uses_admits_the_operator_alone() -> None:
    ctx = McpContext(images=IMAGES, posture=WITH_CLUSTER)
    policy = by_kind(desired_mcpserver_objects(mcp_server(), ctx))["NetworkPolicy"]["spec"]
    assert [r["from"][0]["namespaceSelector"] for r in policy["ingress"]] == [
        {"matchLabels": {"kubernetes.io/metadata.name": "kaos-system"}}
    ]
    # Without the operator's account named, nobody.
    ctx = McpContext(images=IMAGES, posture=SECURED)
    assert (
        by_kind(desired_mcpserver_objects(mcp_server(), ctx))["NetworkPolicy"]["spec"]["ingress"]
        == []
    )


# -- kaos-mcp verifies its callers --------------------------------------------------------


def test_a_secured_kaos_mcp_verifies_its_callers_and_lets_the_operator_list() -> None:
    ctx = McpContext(images=IMAGES, posture=WITH_CLUSTER, clients=("a2", "a1"))
    objects = by_kind(desired_mcpserver_objects(mcp_server(), ctx))
    cm = objects["ConfigMap"]
    assert cm["metadata"]["name"] == "tools-callers"
    assert '"identity": "kaos://agent/ns/a1"' in cm["data"][auth.CALLERS_FILE]
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["kaos-tokens", "kaos-callers"]
    sources = pod["volumes"][0]["projected"]["sources"]
    # The API server's audience only: the pod holds no token an agent would present.
    assert sources[0] == {"serviceAccountToken": {"path": "api/token", "expirationSeconds": 3600}}
    assert pod["volumes"][1] == {"name": "kaos-callers", "configMap": {"name": "tools-callers"}}
    env = env_of(objects["Deployment"])
    assert {k: v for k, v in env.items() if k.startswith("MCP_AUTH") or "CALLERS" in k} == {
        "MCP_AUTH_MODE": "jwks",
        "MCP_AUTH_ISSUER": "https://kubernetes.default.svc.cluster.local",
        "MCP_AUTH_API_SERVER": "https://kubernetes.default.svc",
        "MCP_AUTH_CA_FILE": "/var/run/secrets/kaos/api/ca.crt",
        "MCP_AUTH_TOKEN_FILE": "/var/run/secrets/kaos/api/token",
        "MCP_CALLERS_FILE": "/etc/kaos/callers/callers.json",
        "MCP_AUTH_LISTER": "kaos-system/kaos-operator",
    }
    # What the operator writes is what the runtime accepts.
    runtime = McpSettings.from_env({k: v for k, v in env.items() if isinstance(v, str)})
    assert runtime.callers.mode == "jwks"
    assert runtime.listing.service_account() == ("kaos-system", "kaos-operator")


def test_other_runtimes_get_the_policy_but_no_verification() -> None:
    runtimes = {"fetch": McpRuntime.model_validate({"image": "example.test/fetch:2"})}
    ctx = McpContext(images=IMAGES, posture=WITH_CLUSTER, clients=("a1",), runtimes=runtimes)
    objects = by_kind(desired_mcpserver_objects(mcp_server(runtime="fetch"), ctx))
    assert set(objects) == {"Deployment", "Service", "NetworkPolicy"}
    assert not any(k.startswith("MCP_AUTH") for k in env_of(objects["Deployment"]))


# -- the lists ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry",
    [
        {"cidr": "10.0.0.1/8"},
        {"cidr": "example.com/32"},
        {"cidr": "10.0.0.0/8", "ports": [{"port": 0}]},
    ],
)
def test_a_bad_egress_entry_is_refused(entry: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        mcp_server(params="def f() -> int:\n    return 1\n", egress=[entry])


def test_the_cluster_egress_setting_is_checked_at_load() -> None:
    assert [r.cidr for r in cluster_egress("fd00::/64:443, 10.0.0.0/8")] == [
        "fd00::/64",
        "10.0.0.0/8",
    ]
    with pytest.raises(Exception, match=r"'10\.0\.0\.1' is not CIDR or CIDR:PORT"):
        OperatorSettings.from_env({"KAOS_CLUSTER_EGRESS": "10.0.0.1"})
