"""The chart's ClusterRole for deciding other users' paused runs
(``<release>-agent-approver``: ``create`` on the virtual subresource ``agents/approve``,
what a decision asks RBAC about, and on ``agents/invoke``, what the agent's edge asks of
every caller first), made with security on, for users and groups to bind; nothing
without it."""

from __future__ import annotations

from kaos_core.auth.invoke import APPROVE_SUBRESOURCE, RESOURCE, SUBRESOURCE, VERB

from tests.fixtures.helm import Helm, find_object, kinds


def test_the_approver_role_grants_create_on_agents_approve_and_invoke_only(helm: Helm) -> None:
    assert "ClusterRole/kaos-agent-approver" not in kinds(helm.template())
    objects = helm.template("posture.securityEnabled=true")
    role = find_object(objects, "ClusterRole", "kaos-agent-approver")
    assert role["rules"] == [
        {
            "apiGroups": ["kaos.tools"],
            "resources": [f"{RESOURCE}/{APPROVE_SUBRESOURCE}", f"{RESOURCE}/{SUBRESOURCE}"],
            "verbs": [VERB],
        }
    ]
