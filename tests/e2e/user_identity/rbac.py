"""The chart's RBAC for "who may talk to an agent", applied to the test cluster for one
namespace: ``<release>-agent-user`` (what users are bound to) and the agents' right to
ask (``<release>-agent-review``), as ``helm template`` renders them with a user issuer and
nothing else said of ``posture.userRbac`` (on by default)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.e2e.user_identity.world import AgentNamespace
from tests.fixtures.helm import Helm
from tests.support.cluster import Cluster


def chart_agent_rbac(helm: Helm, release: str, ns: str) -> list[dict[str, Any]]:
    objects = helm.template(
        "posture.securityEnabled=true",
        "posture.userIssuer=https://idp.example.test",
        f"operator.watchNamespace={ns}",
        release=release,
    )
    return [o for o in objects if "-agent-" in o["metadata"]["name"]]


def apply(cluster: Cluster, objects: list[dict[str, Any]]) -> None:
    cluster.kubectl(
        "apply", "-f", "-",
        input=json.dumps({"kind": "List", "apiVersion": "v1", "items": objects}),
    )  # fmt: skip


@contextmanager
def applied_agent_rbac(cluster: Cluster, helm: Helm, release: str, ns: str) -> Iterator[str]:
    """The chart's agent RBAC for ``ns`` applied (cluster-scoped, so deleted after); yields
    the ClusterRole to bind users to."""
    rbac = chart_agent_rbac(helm, release, ns)
    kinds = {f"{o['kind']}/{o['metadata']['name']}" for o in rbac}
    # With a user issuer and userRbac left alone the agents may ask: deny by default.
    assert f"ClusterRoleBinding/{release}-kaos-agent-review-{ns}" in kinds, kinds
    try:
        apply(cluster, rbac)
        yield f"{release}-kaos-agent-user"
    finally:
        for obj in rbac:
            cluster.kubectl(
                "delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found",
                check=False,
            )  # fmt: skip


def _binding(ns: str, name: str, role: tuple[str, str], *users: str) -> dict[str, Any]:
    kind, role_name = role
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name},
        "subjects": [
            {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}
            for user in users
        ],
    }


def namespace_grant(ns: str, cluster_role: str, *users: str) -> dict[str, Any]:
    """A RoleBinding of the chart's ClusterRole: ``users`` may talk to every Agent of ``ns``."""
    return _binding(ns, "agent-users", ("ClusterRole", cluster_role), *users)


def agent_grant(ns: str, agent: str, *users: str) -> list[dict[str, Any]]:
    """What ``kaos agent grant`` writes for one Agent (without its owner reference, so no
    Agent object is needed): a Role on that Agent by name and a RoleBinding of it."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": f"kaos-invoke-{agent}", "namespace": ns},
        "rules": [
            {
                "apiGroups": ["kaos.tools"],
                "resources": ["agents/invoke"],
                "resourceNames": [agent],
                "verbs": ["create"],
            }
        ],
    }
    name = f"kaos-invoke-{agent}-users"
    return [role, _binding(ns, name, ("Role", f"kaos-invoke-{agent}"), *users)]


@contextmanager
def granted_namespace(
    cluster: Cluster, helm: Helm, name: str, agent: str, tmp: Path, *users: str
) -> Iterator[tuple[AgentNamespace, str]]:
    """A fresh namespace ``<name>-<suffix>`` with the chart's agent RBAC of a release of its
    own, ``agent``'s ServiceAccount, and ``users`` allowed to invoke its agents; deleted
    after."""
    suffix = uuid.uuid4().hex[:6]
    ns, release = f"{name}-{suffix}", f"r{suffix}"
    cluster.kubectl("create", "namespace", ns)
    try:
        with applied_agent_rbac(cluster, helm, release, ns) as user_role:
            cluster.kubectl("create", "serviceaccount", agent, "-n", ns)
            apply(cluster, [namespace_grant(ns, user_role, *users)])
            yield AgentNamespace(cluster, ns, tmp), release
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
