"""The chart's ClusterRole for reading agents' token usage (``<release>-agent-usage-reader``:
``get`` on the virtual subresource ``agents/usage``, what ``GET /v1/usage`` asks RBAC
about), made with security on, for users and groups to bind; nothing without it."""

from __future__ import annotations

from kaos_core.auth.invoke import GET, RESOURCE, USAGE_SUBRESOURCE

from tests.fixtures.helm import Helm, find_object, kinds


def test_the_usage_reader_role_grants_get_on_agents_usage_only(helm: Helm) -> None:
    assert "ClusterRole/kaos-agent-usage-reader" not in kinds(helm.template())
    objects = helm.template("posture.securityEnabled=true")
    role = find_object(objects, "ClusterRole", "kaos-agent-usage-reader")
    assert role["rules"] == [
        {
            "apiGroups": ["kaos.tools"],
            "resources": [f"{RESOURCE}/{USAGE_SUBRESOURCE}"],
            "verbs": [GET],
        }
    ]
