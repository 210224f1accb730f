"""The chart's ClusterRole for reading agents' audit trails (``<release>-agent-audit-reader``:
``get`` on the virtual subresource ``agents/audit``, what ``GET /v1/audit`` asks RBAC
about), made with security on, for users and groups to bind; nothing without it."""

from __future__ import annotations

from kaos_core.auth.invoke import AUDIT_SUBRESOURCE, GET, RESOURCE

from tests.fixtures.helm import Helm, find_object, kinds


def test_the_audit_reader_role_grants_get_on_agents_audit_only(helm: Helm) -> None:
    assert "ClusterRole/kaos-agent-audit-reader" not in kinds(helm.template())
    objects = helm.template("posture.securityEnabled=true")
    role = find_object(objects, "ClusterRole", "kaos-agent-audit-reader")
    assert role["rules"] == [
        {
            "apiGroups": ["kaos.tools"],
            "resources": [f"{RESOURCE}/{AUDIT_SUBRESOURCE}"],
            "verbs": [GET],
        }
    ]
