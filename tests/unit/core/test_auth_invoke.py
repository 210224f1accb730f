"""Who may talk to an agent (``kaos_core.auth.invoke``): a user token's claims mapped to a
Kubernetes user and groups as the API server's OIDC flags map them, and the decision asked
of an API server (an in-process one answering SubjectAccessReviews) with a brief cache,
deny by default and 503 when it cannot be asked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kaos_core.auth.access import KubernetesAccess
from kaos_core.auth.invoke import (
    AUTHENTICATED_GROUP,
    ClaimMapping,
    InvokeAccess,
    invoke_attributes,
)
from kaos_core.auth.oidc import VerifiedUser
from kaos_core.auth.verify import Forbidden, HttpsSource, Unauthenticated, VerifierUnavailable

from tests.support.procs import free_port

ISSUER = "https://idp.example.test"

# -------------------------------------------------------------------- claims to a user


def test_the_username_gets_the_api_servers_default_prefix_unless_told() -> None:
    claims = {"sub": "alice", "email": "alice@example.test", "email_verified": True}
    assert ClaimMapping().user(claims, ISSUER, None).username == f"{ISSUER}#alice"
    assert ClaimMapping(username_prefix="oidc:").user(claims, ISSUER, None).username == (
        "oidc:alice"
    )
    assert ClaimMapping(username_prefix="-").user(claims, ISSUER, None).username == "alice"
    # ``email`` is not prefixed by default, as the API server does.
    email = ClaimMapping(username_claim="email").user(claims, ISSUER, None)
    assert email.username == "alice@example.test"


def test_groups_come_from_the_groups_claim_behind_their_prefix() -> None:
    mapping = ClaimMapping(username_prefix="-", groups_claim="groups", groups_prefix="oidc:")
    user = mapping.user({"sub": "a", "groups": ["finance", "staff", "finance"]}, ISSUER, 9.0)
    assert user.groups == ("oidc:finance", "oidc:staff", AUTHENTICATED_GROUP)
    assert user.expires_at == 9.0
    # One string is one group; no claim, or no groups claim configured: only authenticated.
    assert mapping.user({"sub": "a", "groups": "ops"}, ISSUER, None).groups == (
        "oidc:ops",
        AUTHENTICATED_GROUP,
    )
    assert mapping.user({"sub": "a"}, ISSUER, None).groups == (AUTHENTICATED_GROUP,)
    unconfigured = ClaimMapping(username_prefix="-")
    assert unconfigured.user({"sub": "a", "groups": ["x"]}, ISSUER, None).groups == (
        AUTHENTICATED_GROUP,
    )


def test_nobody_chooses_a_system_group_or_user_at_the_identity_provider() -> None:
    mapping = ClaimMapping(username_prefix="-", groups_claim="groups")
    user = mapping.user({"sub": "a", "groups": ["system:masters", "SYSTEM:nodes", "x"]}, ISSUER, 0)
    assert user.groups == ("x", AUTHENTICATED_GROUP)
    with pytest.raises(Unauthenticated, match="system user"):
        mapping.user({"sub": "system:admin"}, ISSUER, None)
    # A prefix keeps them out of the form, as it does at the API server.
    prefixed = ClaimMapping(username_prefix="oidc:", groups_claim="groups", groups_prefix="o:")
    user = prefixed.user({"sub": "system:admin", "groups": ["system:masters"]}, ISSUER, 0)
    assert (user.username, user.groups) == (
        "oidc:system:admin",
        ("o:system:masters", AUTHENTICATED_GROUP),
    )


@pytest.mark.parametrize(
    "claims",
    [
        {},
        {"sub": ""},
        {"sub": 7},
        {"sub": "a", "groups": [1]},
        {"sub": "a", "groups": {"x": 1}},
    ],
)
def test_claims_that_name_no_user_or_no_groups_are_refused(claims: dict[str, Any]) -> None:
    with pytest.raises(Unauthenticated):
        ClaimMapping(groups_claim="groups").user(claims, ISSUER, None)


def test_an_unverified_email_names_nobody() -> None:
    mapping = ClaimMapping(username_claim="email")
    with pytest.raises(Unauthenticated, match="email_verified"):
        mapping.user({"email": "a@example.test", "email_verified": False}, ISSUER, None)


def test_the_attributes_are_create_on_agents_invoke_of_the_one_agent() -> None:
    assert invoke_attributes("team", "billing").body() == {
        "group": "kaos.tools",
        "resource": "agents",
        "subresource": "invoke",
        "verb": "create",
        "namespace": "team",
        "name": "billing",
    }


# -------------------------------------------------------------------- the decision


class ApiServer:
    """SubjectAccessReviews answered from ``allowed`` (user names), each one recorded."""

    def __init__(self) -> None:
        self.allowed: set[str] = set()
        self.reviews: list[dict[str, Any]] = []
        self.status = 201

    async def review(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.reviews.append(body["spec"])
        verdict = {"allowed": body["spec"]["user"] in self.allowed}
        return web.json_response({**body, "status": verdict}, status=self.status)


@pytest.fixture
async def api() -> AsyncIterator[tuple[ApiServer, str]]:
    fake = ApiServer()
    app = web.Application()
    app.router.add_post("/apis/authorization.k8s.io/v1/subjectaccessreviews", fake.review)
    async with TestServer(app, host="127.0.0.1") as server:
        yield fake, str(server.make_url("")).rstrip("/")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _access(url: str, clock: Clock) -> InvokeAccess:
    kube = KubernetesAccess(
        HttpsSource(ca_file=None, token_file=None), url, cache_seconds=5, clock=clock
    )
    mapping = ClaimMapping(username_prefix="oidc:", groups_claim="groups")
    return InvokeAccess(kube, mapping, namespace="team", name="billing")


def _user(sub: str, expires_at: float = 10_000.0) -> VerifiedUser:
    return VerifiedUser(
        principal=sub,
        issuer=ISSUER,
        expires_at=expires_at,
        token="t",
        claims={"sub": sub, "groups": ["finance"]},
    )


async def test_a_granted_user_passes_and_the_decision_is_cached_briefly(
    api: tuple[ApiServer, str],
) -> None:
    fake, url = api
    clock = Clock()
    access = _access(url, clock)
    fake.allowed.add("oidc:alice")
    try:
        await access.check(_user("alice"))
        await access.check(_user("alice"))
        assert len(fake.reviews) == 1
        assert fake.reviews[0] == {
            "user": "oidc:alice",
            "groups": ["finance", AUTHENTICATED_GROUP],
            "resourceAttributes": invoke_attributes("team", "billing").body(),
        }
        # Revoked at the API server: refused once the cached decision is older than 5 s.
        fake.allowed.clear()
        clock.now += 4.9
        await access.check(_user("alice"))
        clock.now += 0.2
        with pytest.raises(Forbidden) as refused:
            await access.check(_user("alice"))
        assert refused.value.code == "agent_not_granted"
        assert refused.value.message == (
            'user "oidc:alice" may not create agents.kaos.tools/invoke "billing" in namespace'
            ' "team" (grant it with kaos agent grant, or a binding of the ClusterRole'
            " <release>-agent-user)"
        )
    finally:
        await access.close()


async def test_no_decision_outlives_the_token(api: tuple[ApiServer, str]) -> None:
    fake, url = api
    clock = Clock()
    access = _access(url, clock)
    fake.allowed.add("oidc:alice")
    try:
        await access.check(_user("alice", expires_at=clock.now + 1))
        clock.now += 1
        await access.check(_user("alice", expires_at=clock.now + 100))
        assert len(fake.reviews) == 2
    finally:
        await access.close()


async def test_a_review_the_api_server_refuses_is_a_503_never_an_allow(
    api: tuple[ApiServer, str],
) -> None:
    fake, url = api
    fake.allowed.add("oidc:alice")
    fake.status = 403  # our own ServiceAccount may not create SubjectAccessReviews
    access = _access(url, Clock())
    try:
        with pytest.raises(VerifierUnavailable) as exc:
            await access.check(_user("alice"))
        assert exc.value.status == 503
    finally:
        await access.close()


async def test_an_unreachable_api_server_is_a_503() -> None:
    access = _access(f"http://127.0.0.1:{free_port()}", Clock())
    try:
        with pytest.raises(VerifierUnavailable) as exc:
            await access.check(_user("alice"))
        assert exc.value.status == 503
    finally:
        await access.close()
