"""Scope derivation and attribution: pure, server-side, fail-closed."""

from __future__ import annotations

import pytest
from kaos_core.errors import BadRequest, Forbidden
from kaos_core.memory.contract import Level
from kaos_core.wire import Identity
from kaos_memory.scope import (
    Posture,
    Scope,
    conversation_key,
    derive_attribution,
    derive_scope,
)
from kaos_memory.storage.mem0.terms import (
    from_entity_id,
    in_scope,
    mem0_filter,
    mem0_ids,
    mem0_metadata,
    to_entity_id,
)

AGENT = "kaos://agent/team/helper"
GROUP = "kaos_memory"
OPEN = Posture()
SECURED = Posture(require_principal=True, require_agent_identity=True)


def scope(
    identity: Identity,
    level: Level,
    *,
    ceiling: Level = "user",
    posture: Posture = OPEN,
    conversational: bool = False,
) -> Scope:
    return derive_scope(
        identity,
        level,
        posture=posture,
        ceiling=ceiling,
        group=GROUP,
        conversational=conversational,
    )


def test_level_filters() -> None:
    full = Identity(agent=AGENT, principal="alice", session="s1")
    assert mem0_filter(scope(full, "session")) == {
        "kaos_group": GROUP,
        "run_id": "s1",
        "user_id": "alice",
    }
    assert mem0_filter(scope(full, "agent")) == {
        "kaos_group": GROUP,
        "agent_id": AGENT,
        "user_id": "alice",
    }
    assert mem0_filter(scope(full, "user")) == {"kaos_group": GROUP, "user_id": "alice"}
    admin = Identity(session="s1")
    # The wildcard sits on run_id, which every fact has, on both backends.
    assert mem0_filter(scope(admin, "store")) == {"kaos_group": GROUP, "run_id": "*"}


def test_principal_absent_drops_the_user_key() -> None:
    ident = Identity(agent=AGENT, session="s1")
    assert mem0_filter(scope(ident, "agent")) == {"kaos_group": GROUP, "agent_id": AGENT}
    assert mem0_filter(scope(ident, "session")) == {"kaos_group": GROUP, "run_id": "s1"}


def test_store_is_forbidden_to_agents() -> None:
    with pytest.raises(Forbidden):
        scope(Identity(agent=AGENT), "store")


@pytest.mark.parametrize(
    ("level", "ceiling"), [("agent", "session"), ("user", "agent"), ("user", "session")]
)
def test_above_ceiling_is_forbidden(level: Level, ceiling: Level) -> None:
    with pytest.raises(Forbidden):
        scope(Identity(agent=AGENT, principal="p", session="s"), level, ceiling=ceiling)


@pytest.mark.parametrize(
    ("identity", "level"),
    [
        (Identity(agent=AGENT, principal="p"), "session"),
        (Identity(principal="p", session="s"), "agent"),
        (Identity(agent=AGENT, session="s"), "user"),
    ],
)
def test_unresolvable_scope_is_bad_request(identity: Identity, level: Level) -> None:
    with pytest.raises(BadRequest):
        scope(identity, level)


def test_conversational_tiers_need_a_session() -> None:
    with pytest.raises(BadRequest):
        scope(Identity(agent=AGENT), "agent", conversational=True)
    # The store level has no conversational tiers, so nothing to resolve.
    assert scope(Identity(), "store", conversational=True).key is None


def test_secured_posture_keeps_the_two_key_partition() -> None:
    with pytest.raises(Forbidden):
        scope(Identity(agent=AGENT, session="s"), "agent", posture=SECURED)
    # Admin calls (no agent) stay trusted paths.
    assert scope(Identity(principal="p"), "user", posture=SECURED).principal == "p"


def test_attribution() -> None:
    attr = derive_attribution(Identity(agent=AGENT, principal="p", session="s"), OPEN, GROUP)
    assert (
        attr.key == conversation_key(GROUP, "s", "p") == "kaos_group:kaos_memory|principal:p|run:s"
    )
    assert mem0_ids(attr) == {"run_id": "s", "user_id": "p", "agent_id": AGENT}
    assert mem0_metadata(attr) == {"kaos_group": GROUP, "kaos_run": "s"}
    with pytest.raises(BadRequest):
        derive_attribution(Identity(agent=AGENT), OPEN, GROUP)
    with pytest.raises(Forbidden):
        derive_attribution(Identity(agent=AGENT, session="s"), SECURED, GROUP)
    with pytest.raises(Forbidden):
        derive_attribution(Identity(principal="p", session="s"), SECURED, GROUP)
    bare = derive_attribution(Identity(session="s"), OPEN, GROUP)
    assert mem0_ids(bare) == {"run_id": "s"}
    assert bare.key == conversation_key(GROUP, "s") == "kaos_group:kaos_memory|run:s"


def test_a_session_id_is_each_principals_own() -> None:
    """The same client-chosen id names a different conversation for each principal (and
    for none), on writes and on reads at every conversational level."""
    alice = Identity(agent=AGENT, principal="alice", session="alice-1")
    bob = Identity(agent=AGENT, principal="bob", session="alice-1")
    nobody = Identity(agent=AGENT, session="alice-1")
    keys = {derive_attribution(i, OPEN, GROUP).key for i in (alice, bob, nobody)}
    assert len(keys) == 3
    for level in ("session", "agent"):
        assert scope(alice, level).key == derive_attribution(alice, OPEN, GROUP).key
        assert scope(nobody, level).key == derive_attribution(nobody, OPEN, GROUP).key
    admin = Identity(principal="alice", session="alice-1")
    assert scope(admin, "user").key == derive_attribution(alice, OPEN, GROUP).key


@pytest.mark.parametrize(
    ("first", "second"),
    [
        # A separator or escape in a principal cannot make two pairs share a key.
        (("alice", "x|run:y"), ("alice|run:x", "y")),
        (("a%7Cb", "s"), ("a|b", "s")),
        (("a", "|principal:b|run:s"), ("a|principal:b", "s")),
    ],
)
def test_conversation_keys_never_collide(first: tuple[str, str], second: tuple[str, str]) -> None:
    (p1, s1), (p2, s2) = first, second
    assert conversation_key(GROUP, s1, p1) != conversation_key(GROUP, s2, p2)
    # The session is what follows the first ``|run:`` (how erasure reads it back).
    for principal, session in (first, second):
        assert conversation_key(GROUP, session, principal).split("|run:", 1)[1] == session


@pytest.mark.parametrize("value", ["alice", "Alice Smith", "a%b", "tab\there", "%20;", "ü ß"])
def test_entity_ids_round_trip_without_whitespace(value: str) -> None:
    encoded = to_entity_id(value)
    assert not any(c.isspace() for c in encoded)
    assert from_entity_id(encoded) == value


def test_scope_matches_rechecks_payloads() -> None:
    s = scope(Identity(agent=AGENT, principal="p", session="s"), "agent")
    assert in_scope(s, {"kaos_group": GROUP, "agent_id": AGENT, "user_id": "p", "run_id": "x"})
    assert not in_scope(s, {"kaos_group": GROUP, "agent_id": AGENT, "run_id": "x"})
    assert not in_scope(s, {"kaos_group": "other", "agent_id": AGENT, "user_id": "p"})
    store = scope(Identity(), "store")
    assert in_scope(store, {"kaos_group": GROUP, "run_id": "anything"})
    assert not in_scope(store, {"kaos_group": "other", "run_id": "anything"})
