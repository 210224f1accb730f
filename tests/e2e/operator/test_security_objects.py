"""With security on, the real operator gives every Agent its own identity and keeps the
callers files and NetworkPolicies (ingress and egress) of every kind current as Agents come,
change and go."""

from __future__ import annotations

from typing import Any

import pytest
from kaos_core.auth import names as auth
from kaos_core.auth.callers import Callers
from kaos_operator.kube import (
    CONFIGMAPS,
    DEPLOYMENTS,
    NETWORKPOLICIES,
    SERVICEACCOUNTS,
    KubeClient,
    Obj,
)

from tests.e2e.operator.helpers import (
    AGENTS,
    container_env,
    create,
    eventually,
    proxy_api,
    store_spec,
    volume_for,
    wait_phase,
)
from tests.fixtures.operator import OperatorFactory

pytestmark = pytest.mark.cluster

TOOLS = 'def shout(text: str) -> str:\n    """Upper-case."""\n    return text.upper()\n'
REMOTE = {"type": "remote", "memoryStore": "mem"}


async def callers_of(kube: KubeClient, ns: str, owner: str) -> list[str] | None:
    """Identities in ``owner``'s callers ConfigMap; None while it does not exist."""
    cm = await kube.get(CONFIGMAPS, ns, f"{owner}-callers")
    if cm is None:
        return None
    doc = Callers.model_validate_json(cm["data"][auth.CALLERS_FILE])
    return [c.identity for c in doc.callers]


def egress_targets(policy: Obj) -> dict[str, list[str]]:
    """component -> instance names a NetworkPolicy lets its pods connect to, after the DNS
    rule every policy of the operator starts with (asserted here)."""
    rules: list[dict[str, Any]] = policy["spec"]["egress"]
    dns = rules[0]
    assert dns["ports"] == [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]
    assert dns["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    out: dict[str, list[str]] = {}
    for rule in rules[1:]:
        (peer,) = rule["to"]
        selector = peer["podSelector"]
        (expr,) = selector["matchExpressions"]
        out[selector["matchLabels"]["app.kubernetes.io/name"]] = expr["values"]
    return out


def ident(ns: str, name: str) -> str:
    return f"kaos://agent/{ns}/{name}"


def ingress_sources(policy: Obj) -> dict[str, list[str]] | str:
    """component -> instance names admitted by a NetworkPolicy; "anywhere" for an open
    rule. Asserts the one-port shape every policy of the operator has."""
    rules: list[dict[str, Any]] = policy["spec"].get("ingress") or []
    if not rules:
        return {}
    (rule,) = rules
    assert len(rule["ports"]) == 1 and rule["ports"][0]["protocol"] == "TCP"
    if "from" not in rule:
        return "anywhere"
    out: dict[str, list[str]] = {}
    for peer in rule["from"]:
        selector = peer["podSelector"]
        (expr,) = selector["matchExpressions"]
        assert expr["key"] == "app.kubernetes.io/instance" and expr["operator"] == "In"
        out[selector["matchLabels"]["app.kubernetes.io/name"]] = expr["values"]
    return out


async def test_identities_callers_and_network_policies_follow_the_agents(
    kube: KubeClient, k8s_namespace: str, operator_factory: OperatorFactory
) -> None:
    ns = k8s_namespace
    operator_factory(KAOS_SECURITY_ENABLED="true")
    await create(kube, ns, "ModelAPI", "llm", proxy_api())
    await create(kube, ns, "MCPServer", "tools", {"params": TOOLS})
    await volume_for(kube, ns, "mem-data")
    await create(kube, ns, "MemoryStore", "mem", store_spec())
    await create(
        kube,
        ns,
        "Agent",
        "a",
        {
            "modelAPI": "llm",
            "mcpServers": ["tools"],
            "agentNetwork": {"access": ["b"]},
            "config": {"memory": REMOTE},
        },
    )
    # b is closed (expose: false), so its policy admits only its callers' pods.
    await create(
        kube,
        ns,
        "Agent",
        "b",
        {"modelAPI": "llm", "agentNetwork": {"expose": False}, "config": {"memory": REMOTE}},
    )
    await wait_phase(kube, ns, "Agent", "a", "Ready", within=120)
    await wait_phase(kube, ns, "Agent", "b", "Ready", within=120)

    # One identity per Agent, owned by it, with no API token.
    for name in ("a", "b"):
        agent = await kube.get(AGENTS, ns, name)
        sa = await kube.get(SERVICEACCOUNTS, ns, name)
        assert agent is not None and sa is not None
        assert sa["automountServiceAccountToken"] is False
        (ref,) = sa["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"]) == ("Agent", agent["metadata"]["uid"])

    dep = await kube.get(DEPLOYMENTS, ns, "a")
    assert dep is not None
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "a"
    assert pod["automountServiceAccountToken"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    projected = volumes["kaos-tokens"]["projected"]["sources"]
    sources = [s["serviceAccountToken"] for s in projected if "serviceAccountToken" in s]
    assert sources == [
        {"audience": "kaos.dev/memory", "path": "memory/token", "expirationSeconds": 3600},
        {"audience": "kaos.dev/agent", "path": "agent/token", "expirationSeconds": 3600},
        {"audience": "kaos.dev/mcp", "path": "mcp/token", "expirationSeconds": 3600},
        # The API server's audience: for verifying the agents that delegate to it.
        {"path": "api/token", "expirationSeconds": 3600},
    ]
    ca = {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "api/ca.crt"}]}
    assert {"configMap": ca} in projected
    assert volumes["kaos-callers"]["configMap"]["name"] == "a-callers"
    mounts = {m["mountPath"]: m for m in pod["containers"][0]["volumeMounts"]}
    assert mounts[auth.TOKEN_DIR] == {
        "name": "kaos-tokens",
        "mountPath": auth.TOKEN_DIR,
        "readOnly": True,
    }
    assert mounts[auth.CALLERS_DIR]["readOnly"] is True
    env = container_env(dep)
    assert env["AGENT_MEMORY_TOKEN_FILE"] == auth.MEMORY_TOKEN_PATH
    assert env["AGENT_PEER_TOKEN_FILE"] == auth.AGENT_TOKEN_PATH
    assert env["AGENT_MCP_TOKEN_FILE"] == auth.MCP_TOKEN_PATH
    assert env["AGENT_CALLERS_FILE"] == auth.CALLERS_PATH
    assert env["AGENT_AUTH_MODE"] == "jwks"

    store = await kube.get(DEPLOYMENTS, ns, "mem")
    assert store is not None
    store_env = container_env(store)
    assert store_env["KAOS_MEMORY_CALLERS_FILE"] == auth.CALLERS_PATH
    assert store_env["KAOS_MEMORY_AUTH_MODE"] == "jwks"
    assert store_env["KAOS_MEMORY_AUTH_ISSUER"] == "https://kubernetes.default.svc.cluster.local"
    # The memory pod keeps its default token: it fetches the issuer's keys with it.
    assert "automountServiceAccountToken" not in store["spec"]["template"]["spec"]

    # Callers files: b's lists a (a names b in access), a's nobody, the store's both.
    assert await callers_of(kube, ns, "b") == [ident(ns, "a")]
    assert await callers_of(kube, ns, "a") == []
    assert await callers_of(kube, ns, "mem") == [ident(ns, "a"), ident(ns, "b")]
    # kaos-mcp verifies its callers too: the Agents that list it.
    assert await callers_of(kube, ns, "tools") == [ident(ns, "a")]

    # NetworkPolicies: each kind's pods, admitting only their referrers' pods.
    async def policy(name: str) -> Obj:
        obj = await kube.get(NETWORKPOLICIES, ns, name)
        assert obj is not None, name
        return obj

    expected: dict[str, tuple[str, int, dict[str, list[str]] | str]] = {
        "mem": ("memorystore", 8080, {"agent": ["a", "b"]}),
        "a": ("agent", 8000, "anywhere"),
        "b": ("agent", 8000, {"agent": ["a"]}),
        "tools": ("mcpserver", 8000, {"agent": ["a"]}),
        "llm": ("modelapi", 4000, {"agent": ["a", "b"], "memorystore": ["mem"]}),
    }
    for name, (component, port, admitted) in expected.items():
        obj = await policy(name)
        assert obj["spec"]["podSelector"] == {
            "matchLabels": {
                "app.kubernetes.io/name": component,
                "app.kubernetes.io/instance": name,
            }
        }, name
        assert obj["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert obj["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": port}]
        assert ingress_sources(obj) == admitted, name

    # Egress: DNS first, then what each references (the exact rules: test_desired_egress).
    expected_egress: dict[str, dict[str, list[str]]] = {
        "a": {"modelapi": ["llm"], "mcpserver": ["tools"], "memorystore": ["mem"], "agent": ["b"]},
        "b": {"modelapi": ["llm"], "memorystore": ["mem"]},
        "mem": {"modelapi": ["llm"]},
        "tools": {},
        "llm": {},
    }
    for name, targets in expected_egress.items():
        obj = await policy(name)
        assert egress_targets(obj) == targets, name

    # a revokes its grant: b's callers file and policy drop a, b itself untouched.
    b_before = await kube.get(AGENTS, ns, "b")
    a_obj = await kube.get(AGENTS, ns, "a")
    assert a_obj is not None and b_before is not None
    a_obj["spec"]["agentNetwork"]["access"] = []
    await kube.replace(AGENTS, ns, "a", a_obj)

    async def b_revoked() -> bool:
        nobody = await callers_of(kube, ns, "b") == []
        closed = ingress_sources(await policy("b")) == {}
        # a may no longer open connections to b either.
        a_out = egress_targets(await policy("a"))
        return nobody and closed and "agent" not in a_out

    await eventually(b_revoked, within=30, what="b's callers file and policy to drop a")
    b_after = await kube.get(AGENTS, ns, "b")
    assert b_after is not None
    assert b_after["metadata"]["generation"] == b_before["metadata"]["generation"]

    # b goes: its identity, callers file and policy with it; the store and the ModelAPI
    # stop admitting it.
    await kube.delete(AGENTS, ns, "b")

    async def b_gone() -> bool:
        owned = [
            await kube.get(SERVICEACCOUNTS, ns, "b"),
            await kube.get(CONFIGMAPS, ns, "b-callers"),
            await kube.get(NETWORKPOLICIES, ns, "b"),
        ]
        store_callers = await callers_of(kube, ns, "mem")
        llm = ingress_sources(await policy("llm"))
        return (
            owned == [None, None, None]
            and store_callers == [ident(ns, "a")]
            and llm == {"agent": ["a"], "memorystore": ["mem"]}
        )

    await eventually(b_gone, within=60, what="b's objects pruned and b dropped everywhere")
    assert ingress_sources(await policy("mem")) == {"agent": ["a"]}
