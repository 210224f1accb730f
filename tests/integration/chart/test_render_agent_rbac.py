"""The chart's RBAC for "who may talk to an agent": the ClusterRole users are bound to
(`<release>-agent-user`, with security on) and the agents' right to ask
(`<release>-agent-review`, with a user issuer unless `posture.userRbac=false`): on by
default with users, an explicit opt-out, nothing without users."""

from __future__ import annotations

from typing import Any

from kaos_core.auth import names as auth
from kaos_operator.desired.security import user_rbac_env
from kaos_operator.settings import OperatorSettings

from tests.fixtures.helm import CHART_DIR, Helm, find_object, kinds

USERS = ("posture.securityEnabled=true", "posture.userIssuer=https://idp.example.test")
# The ClusterRoles users are bound to, made with security on whatever userRbac says.
USER_ROLES = {
    "ClusterRole/kaos-agent-user",
    "ClusterRole/kaos-agent-usage-reader",
    "ClusterRole/kaos-agent-audit-reader",
    "ClusterRole/kaos-agent-approver",
}


def _agent_objects(helm: Helm, *sets: str) -> set[str]:
    return {k for k in kinds(helm.template(*sets)) if "-agent-" in k}


def _operator_config(objects: list[dict[str, Any]]) -> dict[str, str]:
    config: dict[str, str] = find_object(objects, "ConfigMap", "kaos-operator")["data"]
    return config


def _agent_rbac_env(objects: list[dict[str, Any]]) -> dict[str, str]:
    """What the operator loading this release's ConfigMap projects into every agent."""
    return user_rbac_env(OperatorSettings.from_env(_operator_config(objects)).posture)


def test_with_users_the_agents_ask_rbac_by_default(helm: Helm) -> None:
    assert _agent_objects(helm) == set()
    objects = helm.template(
        *USERS,
        "operator.watchNamespace=team-a",
        "posture.tokenReviewNamespaces={team-b,team-a}",
    )
    assert {k for k in kinds(objects) if "-agent-" in k} == {
        *USER_ROLES,
        "ClusterRole/kaos-agent-review",
        "ClusterRoleBinding/kaos-agent-review-team-a",
        "ClusterRoleBinding/kaos-agent-review-team-b",
    }
    assert _operator_config(objects)["KAOS_USER_RBAC"] == "true"
    assert _agent_rbac_env(objects) == {
        auth.AGENT_RBAC: "true",
        auth.AGENT_RBAC_USERNAME_CLAIM: "sub",
    }
    user = find_object(objects, "ClusterRole", "kaos-agent-user")
    assert user["rules"] == [
        {"apiGroups": ["kaos.tools"], "resources": ["agents/invoke"], "verbs": ["create"]}
    ]
    review = find_object(objects, "ClusterRole", "kaos-agent-review")
    assert review["rules"] == [
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        }
    ]
    # Every Agent has its own ServiceAccount: the namespace's ServiceAccounts group.
    binding = find_object(objects, "ClusterRoleBinding", "kaos-agent-review-team-b")
    assert binding["roleRef"]["name"] == "kaos-agent-review"
    assert binding["subjects"] == [
        {
            "kind": "Group",
            "apiGroup": "rbac.authorization.k8s.io",
            "name": "system:serviceaccounts:team-b",
        }
    ]
    mapped = helm.template(
        *USERS, "posture.userUsernamePrefix=oidc:", "posture.userGroupsClaim=groups"
    )
    assert _agent_rbac_env(mapped) == {
        auth.AGENT_RBAC: "true",
        auth.AGENT_RBAC_USERNAME_CLAIM: "sub",
        auth.AGENT_RBAC_USERNAME_PREFIX: "oidc:",
        auth.AGENT_RBAC_GROUPS_CLAIM: "groups",
    }


def test_user_rbac_false_is_an_explicit_opt_out(helm: Helm) -> None:
    objects = helm.template(*USERS, "posture.userRbac=false", "operator.watchNamespace=team-a")
    assert {k for k in kinds(objects) if "-agent-" in k} == USER_ROLES
    assert _operator_config(objects)["KAOS_USER_RBAC"] == "false"
    assert _agent_rbac_env(objects) == {}


def test_without_users_user_rbac_changes_nothing(helm: Helm) -> None:
    for sets in (("posture.securityEnabled=true",),
                 ("posture.securityEnabled=true", "posture.userRbac=true")):  # fmt: skip
        objects = helm.template(*sets, "operator.watchNamespace=team-a")
        assert {k for k in kinds(objects) if "-agent-" in k} == USER_ROLES
        assert _agent_rbac_env(objects) == {}


def test_the_notes_say_who_may_talk_to_agents(helm: Helm) -> None:
    def notes(*sets: str) -> str:
        argv = ["install", "kaos", str(CHART_DIR), "--namespace", "kaos-system", "--dry-run=client"]
        for assignment in sets:
            argv += ["--set", assignment]
        return helm.run(*argv).stdout.split("NOTES:", 1)[1]

    granted = notes(*USERS)
    assert (
        "Agents serve only the verified users RBAC lets create their agents/invoke"
        " (posture.userRbac):\n"
        "  kaos agent grant USER AGENT -n NAMESPACE   (or bind the ClusterRole kaos-agent-user)\n"
    ) in granted
    assert "posture.userRbac=false: every verified user may talk to every agent.\n" in notes(
        *USERS, "posture.userRbac=false"
    )
    for without_users in (notes(), notes("posture.securityEnabled=true")):
        assert "agents/invoke" not in without_users and "userRbac" not in without_users
