"""The audience of end users' tokens (``kaos_core.auth.config.UserAudience``): one literal
for every agent, or a template of each agent's own, checked at load, rendered for one agent
and matched as a form; and the user verifier holding a token to one of them. The agent's
use of it is in tests/unit/agent/test_user_audience.py; the real provider in
tests/e2e/user_identity/test_agent_audience.py."""

from __future__ import annotations

import re
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from kaos_core.auth.config import UserAudience, UserAuthSettings
from kaos_core.auth.oidc import UserVerifier
from kaos_core.auth.verify import JwksVerifier, Unauthenticated, check_registered

from tests.support.jwt_craft import jwks, sign

ISSUER = "https://idp.example.test"
PER_AGENT = "kaos.dev/agent/{namespace}/{name}"
NOW = 1_900_000_000.0


@pytest.fixture(scope="module")
def key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def token(key: RSAPrivateKey, aud: Any) -> str:
    return sign({"iss": ISSUER, "aud": aud, "sub": "alice", "iat": NOW, "exp": NOW + 300}, key)


def verifier(key: RSAPrivateKey, audience: str) -> UserVerifier:
    doc = jwks(key)

    async def source() -> dict[str, Any]:
        return doc

    clock = lambda: NOW  # noqa: E731 - a fixed clock
    keys = JwksVerifier(ISSUER, source=source, clock=clock)
    return UserVerifier(UserAuthSettings(issuer=ISSUER, audience=audience), keys=keys, clock=clock)


def test_a_template_renders_each_agents_own_audience() -> None:
    per_agent = UserAudience(PER_AGENT)
    assert per_agent.per_agent and per_agent.placeholders == {"namespace", "name"}
    assert per_agent.of_agent("team-a", "billing") == "kaos.dev/agent/team-a/billing"
    assert per_agent.of_identity("kaos://agent/team-a/billing.v2") == (
        "kaos.dev/agent/team-a/billing.v2"
    )
    with pytest.raises(ValueError, match="not an agent identity"):
        per_agent.of_identity("alice")
    # A literal is every agent's audience, and the form it matches is itself.
    shared = UserAudience("kaos")
    assert not shared.per_agent and shared.of_agent("team-a", "billing") == "kaos"
    assert shared.matches("kaos") and not shared.matches("kaos2")
    # Braces are written doubled; a literal with them renders and matches them once.
    braces = UserAudience("urn:{{kaos}}:{name}")
    assert braces.of_agent("ns", "a") == "urn:{kaos}:a" and braces.matches("urn:{kaos}:b")


@pytest.mark.parametrize(
    ("audience", "matches"),
    [
        ("kaos.dev/agent/team-a/billing", True),
        ("kaos.dev/agent/a/b.c-d", True),
        ("kaos.dev/agent/team-a", False),
        ("kaos.dev/agent/team-a/billing/extra", False),
        ("kaos.dev/agent/team.a/billing", False),  # a namespace is a DNS label
        ("kaos.dev/agent/Team-A/billing", False),
        ("kaos.dev/agent//billing", False),
        ("xkaos.dev/agent/team-a/billing", False),
        ("kaos.dev/agent/team-a/billing\n", False),
        ("kaosXdev/agent/team-a/billing", False),  # the template's dots are text
        ("kaos", False),
        ("kaos.dev/memory", False),
    ],
)
def test_a_template_matches_only_audiences_of_its_form(audience: str, matches: bool) -> None:
    assert UserAudience(PER_AGENT).matches(audience) is matches


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("", "must not be empty"),
        ("  ", "must not be empty"),
        ("kaos.dev/agent/{nmae}", r"placeholder other than \{namespace\}, \{name\}"),
        ("kaos.dev/agent/{}", "placeholder other than"),
        ("kaos.dev/agent/{0}", "placeholder other than"),
        ("kaos.dev/agent/{name!r}", "placeholder other than"),
        ("kaos.dev/agent/{name:>9}", "placeholder other than"),
        ("kaos.dev/agent/{name", "unmatched brace"),
        ("kaos.dev/agent/name}", "unmatched brace"),
        ("kaos.dev/{name}/{name}", r"names \{name\} more than once"),
        # Alone, a placeholder would match the audiences of other services too.
        ("{name}", "needs text besides"),
        ("{namespace}{name}", "needs text besides"),
    ],
)
def test_an_unusable_template_is_refused_with_what_is_wrong(template: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        UserAudience(template)
    with pytest.raises(ValueError, match=message):
        UserAuthSettings(issuer=ISSUER, audience=template)


def test_the_audience_check_takes_a_literal_exactly_or_a_templates_form() -> None:
    def claims(aud: Any) -> dict[str, Any]:
        return {"iss": ISSUER, "aud": aud, "iat": NOW, "exp": NOW + 60}

    def accepted(aud: Any, audience: str | UserAudience) -> bool:
        try:
            check_registered(claims(aud), issuer=ISSUER, audience=audience, now=NOW, leeway=0)
        except Unauthenticated:
            return False
        return True

    per_agent = UserAudience(PER_AGENT)
    assert accepted(["account", "kaos.dev/agent/ns/a"], per_agent)
    assert accepted("kaos.dev/agent/ns/a", per_agent)
    for aud in ("kaos", ["kaos", "account"], [7, None], {"x": 1}, None, PER_AGENT):
        assert not accepted(aud, per_agent), aud
    assert accepted(["kaos"], "kaos") and not accepted([7], "kaos")
    with pytest.raises(Unauthenticated, match=f"not meant for audience {PER_AGENT}$"):
        check_registered(claims("kaos"), issuer=ISSUER, audience=per_agent, now=NOW, leeway=0)


async def test_a_per_agent_verifier_holds_a_token_to_one_agent_or_to_some_agent(
    key: RSAPrivateKey,
) -> None:
    users = verifier(key, PER_AGENT)
    coordinator = token(key, "kaos.dev/agent/ns/coordinator")
    # Asked for one agent's audience: only a token meant for that agent.
    own = await users.verify(coordinator, "kaos.dev/agent/ns/coordinator")
    assert own.principal == "alice"
    with pytest.raises(Unauthenticated, match=re.escape("audience kaos.dev/agent/ns/researcher")):
        await users.verify(coordinator, "kaos.dev/agent/ns/researcher")
    # Asked for none (a forwarded token, the memory service): any agent's, nothing else.
    assert (await users.verify(coordinator)).principal == "alice"
    for aud in ("kaos", "kaos.dev/memory", "kaos.dev/agent/ns", ["account"]):
        with pytest.raises(Unauthenticated, match="not meant for audience"):
            await users.verify(token(key, aud))


async def test_a_literal_audience_verifies_as_before(key: RSAPrivateKey) -> None:
    users = verifier(key, "kaos")
    assert (await users.verify(token(key, ["kaos", "account"]))).principal == "alice"
    for aud in ("kaos.dev/agent/ns/coordinator", "kaos-other", ["account"]):
        with pytest.raises(Unauthenticated, match=r"not meant for audience kaos$"):
            await users.verify(token(key, aud))
