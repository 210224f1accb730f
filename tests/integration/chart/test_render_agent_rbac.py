"""The chart's RBAC for "who may talk to an agent": the ClusterRole users are bound to
(`<release>-agent-user`, with security on) and the agents' right to ask
(`<release>-agent-review`, only with `posture.userRbac`), and the values that refuse."""

from __future__ import annotations

from tests.fixtures.helm import Helm, find_object, kinds

USERS = ("posture.securityEnabled=true", "posture.userIssuer=https://idp.example.test")


def _agent_objects(helm: Helm, *sets: str) -> set[str]:
    return {k for k in kinds(helm.template(*sets)) if "-agent-" in k}


def test_the_agent_user_role_ships_with_security_and_reviews_with_user_rbac(helm: Helm) -> None:
    assert _agent_objects(helm) == set()
    assert _agent_objects(helm, *USERS) == {"ClusterRole/kaos-agent-user"}
    objects = helm.template(
        *USERS,
        "posture.userRbac=true",
        "operator.watchNamespace=team-a",
        "posture.tokenReviewNamespaces={team-b,team-a}",
    )
    assert {k for k in kinds(objects) if "-agent-" in k} == {
        "ClusterRole/kaos-agent-user",
        "ClusterRole/kaos-agent-review",
        "ClusterRoleBinding/kaos-agent-review-team-a",
        "ClusterRoleBinding/kaos-agent-review-team-b",
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
    config = find_object(
        helm.template(
            *USERS,
            "posture.userRbac=true",
            "posture.userUsernamePrefix=oidc:",
            "posture.userGroupsClaim=groups",
        ),
        "ConfigMap",
        "kaos-operator",
    )["data"]
    assert (config["KAOS_USER_RBAC"], config["KAOS_USER_USERNAME_PREFIX"]) == ("true", "oidc:")
    assert config["KAOS_USER_GROUPS_CLAIM"] == "groups"


def test_user_rbac_without_users_fails_the_install(helm: Helm) -> None:
    proc = helm.template_text("posture.securityEnabled=true", "posture.userRbac=true", check=False)
    assert proc.returncode != 0
    assert "posture.userRbac needs posture.userIssuer" in proc.stderr
