"""The chart's ClusterRoles for reading agents' record sets (``<release>-agent-usage-reader``
and ``<release>-agent-audit-reader``: ``get`` on the virtual subresources ``agents/usage``
and ``agents/audit``, what ``GET /v1/usage`` and ``GET /v1/audit`` ask RBAC about), made
with security on, for users and groups to bind; nothing without it."""

from __future__ import annotations

import pytest
from kaos_core.auth.invoke import AUDIT_SUBRESOURCE, GET, RESOURCE, USAGE_SUBRESOURCE

from tests.fixtures.helm import Helm, find_object, kinds


@pytest.mark.parametrize(
    ("role_name", "subresource"),
    [
        ("kaos-agent-usage-reader", USAGE_SUBRESOURCE),
        ("kaos-agent-audit-reader", AUDIT_SUBRESOURCE),
    ],
)
def test_the_reader_role_grants_get_on_its_subresource_only(
    helm: Helm, role_name: str, subresource: str
) -> None:
    assert f"ClusterRole/{role_name}" not in kinds(helm.template())
    objects = helm.template("posture.securityEnabled=true")
    role = find_object(objects, "ClusterRole", role_name)
    assert role["rules"] == [
        {
            "apiGroups": ["kaos.tools"],
            "resources": [f"{RESOURCE}/{subresource}"],
            "verbs": [GET],
        }
    ]
