"""Any verb on any virtual subresource of an Agent (``kaos_core.auth.invoke``): the
question a SubjectAccessReview carries, and its decision kept apart from invoke's by an
in-process API server that grants per subresource."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kaos_core.auth.access import KubernetesAccess
from kaos_core.auth.invoke import (
    APPROVE_SUBRESOURCE,
    AUDIT_SUBRESOURCE,
    GET,
    USAGE_SUBRESOURCE,
    ClaimMapping,
    InvokeAccess,
    agent_attributes,
    invoke_attributes,
)
from kaos_core.auth.oidc import VerifiedUser
from kaos_core.auth.verify import Forbidden, HttpsSource

ISSUER = "https://idp.example.test"


def test_the_attributes_name_the_verb_and_the_subresource() -> None:
    assert agent_attributes("team", "billing", verb=GET, subresource=USAGE_SUBRESOURCE).body() == {
        "group": "kaos.tools",
        "resource": "agents",
        "subresource": "usage",
        "verb": "get",
        "namespace": "team",
        "name": "billing",
    }
    assert agent_attributes("team", "billing") == invoke_attributes("team", "billing")
    # No subresource: the Agent itself.
    assert "subresource" not in agent_attributes("team", "billing", verb=GET, subresource="").body()


class ApiServer:
    """Grants ``(user, verb, subresource)`` triples listed in ``allowed``."""

    def __init__(self) -> None:
        self.allowed: set[tuple[str, str, str]] = set()
        self.reviews: list[dict[str, Any]] = []

    async def review(self, request: web.Request) -> web.Response:
        body = await request.json()
        spec = body["spec"]
        self.reviews.append(spec)
        attrs = spec["resourceAttributes"]
        key = (spec["user"], attrs["verb"], attrs.get("subresource", ""))
        return web.json_response({**body, "status": {"allowed": key in self.allowed}}, status=201)


@pytest.fixture
async def access() -> AsyncIterator[tuple[ApiServer, InvokeAccess]]:
    fake = ApiServer()
    app = web.Application()
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", fake.review)
    async with TestServer(app, host="127.0.0.1") as server:
        kube = KubernetesAccess(
            HttpsSource(ca_file=None, token_file=None), str(server.make_url("")).rstrip("/")
        )
        checker = InvokeAccess(
            kube, ClaimMapping(username_prefix="oidc:"), namespace="team", name="billing"
        )
        try:
            yield fake, checker
        finally:
            await checker.close()


def _user(sub: str) -> VerifiedUser:
    return VerifiedUser(
        principal=sub, issuer=ISSUER, expires_at=None, token="t", claims={"sub": sub}
    )


async def test_each_subresource_is_its_own_question(
    access: tuple[ApiServer, InvokeAccess],
) -> None:
    fake, checker = access
    fake.allowed.add(("oidc:alice", "create", "invoke"))
    fake.allowed.add(("oidc:carol", "get", "usage"))
    alice, carol = _user("alice"), _user("carol")

    await checker.check(alice)  # invoke, as before
    assert await checker.allowed(carol, verb=GET, subresource=USAGE_SUBRESOURCE)
    await checker.check(carol, verb=GET, subresource=USAGE_SUBRESOURCE)
    # Invoking grants none of the others, and reading usage grants neither audit nor invoke.
    assert not await checker.allowed(alice, verb=GET, subresource=USAGE_SUBRESOURCE)
    assert not await checker.allowed(carol, verb=GET, subresource=AUDIT_SUBRESOURCE)
    with pytest.raises(Forbidden) as refused:
        await checker.check(alice, subresource=APPROVE_SUBRESOURCE)
    assert refused.value.code == "agent_not_granted"
    assert refused.value.message == (
        'user "oidc:alice" may not create agents.kaos.tools/approve "billing" in namespace'
        ' "team" (grant it with a Role binding naming this Agent)'
    )
    with pytest.raises(Forbidden, match="kaos agent grant"):
        await checker.check(carol)
    asked = {
        (r["user"], r["resourceAttributes"]["verb"], r["resourceAttributes"]["subresource"])
        for r in fake.reviews
    }
    assert ("oidc:alice", "create", "approve") in asked
    assert ("oidc:carol", "get", "audit") in asked
    assert all(r["resourceAttributes"]["name"] == "billing" for r in fake.reviews)
