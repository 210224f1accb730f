"""Scope and attribution, derived server-side from the verified identity: pure functions.

Reads and erasure select a *scope* (a level with the owner keys that take part in it
plus, for non-store levels, the session's conversational key); writes carry level-less
compound *attribution*. Both come only from the identity headers, the requested level, the
posture and the store's read ceiling. Anything that cannot resolve a usable owner key fails
here, before a store is touched, so an unresolved scope can never widen into an unscoped
query. These are the domain rules only: how a scope becomes a backend's filter is the
business of that backend's adapter (``storage.mem0`` for Mem0).
"""

from __future__ import annotations

from dataclasses import dataclass

from kaos_core.errors import BadRequest, Forbidden
from kaos_core.memory.contract import Level, scope_rank
from kaos_core.wire import Identity


@dataclass(frozen=True)
class Posture:
    """The cluster posture projected into the service by the operator."""

    require_principal: bool = False
    require_agent_identity: bool = False


def conversation_key(group: str, session: str, principal: str | None = None) -> str:
    """Key of a session's window and digest: stable store group, the principal whose
    conversation it is (when there is one) and the client's session id.

    Session ids are strings the client chooses: a principal's sessions live under that
    principal, so another principal writing to the same id first starts a conversation of
    its own and cannot claim (squat) it. The principal is escaped so it never contains the
    ``|`` that separates the parts: two (principal, session) pairs never share a key.
    """
    if principal is None:
        return f"kaos_group:{group}|run:{session}"
    escaped = principal.replace("%", "%25").replace("|", "%7C")
    return f"kaos_group:{group}|principal:{escaped}|run:{session}"


@dataclass(frozen=True)
class Attribution:
    """Everything a write is attributed to: every verified key, never a level."""

    group: str
    session: str
    principal: str | None
    agent: str | None

    @property
    def key(self) -> str:
        return conversation_key(self.group, self.session, self.principal)


@dataclass(frozen=True)
class Scope:
    """A resolved read or erasure scope.

    ``session`` is the conversational key's session (``None`` for ``store``, which has
    no conversational tiers); ``principal``/``agent`` are the owner keys that take part
    in the long-term filter at this level (the principal also names whose session it is).
    """

    level: Level
    group: str
    session: str | None
    principal: str | None
    agent: str | None

    @property
    def key(self) -> str | None:
        if self.session is None:
            return None
        return conversation_key(self.group, self.session, self.principal)


def derive_attribution(identity: Identity, posture: Posture, group: str) -> Attribution:
    """Attribution of a write; fails closed on a missing session or posture key."""
    if identity.session is None:
        raise BadRequest("a write needs the X-Session-Id header", code="missing_session")
    if posture.require_principal and identity.principal is None:
        raise Forbidden("this store requires X-Principal on writes", code="principal_required")
    if posture.require_agent_identity and identity.agent is None:
        raise Forbidden(
            "this store requires X-Agent-Identity on writes", code="agent_identity_required"
        )
    return Attribution(
        group=group, session=identity.session, principal=identity.principal, agent=identity.agent
    )


def derive_scope(
    identity: Identity,
    level: Level,
    *,
    posture: Posture,
    ceiling: Level,
    group: str,
    conversational: bool,
) -> Scope:
    """Scope of a read or erasure at ``level``.

    403: ``store`` with an agent header, an agent's level above the ceiling, or a secured posture
    whose principal is missing on an agent's call. 400: an owner key of the level is
    missing, or conversational tiers are asked for without a session.
    """
    if level == "store":
        if identity.agent is not None:
            raise Forbidden(
                "the store level is administrative: not available to agents",
                code="store_level_forbidden",
            )
        return Scope(level="store", group=group, session=None, principal=None, agent=None)
    # The ceiling bounds agents; an admin call (no agent) may use any level, as it may
    # the store level (cross-user erasure is ``user`` level by an administrator).
    if identity.agent is not None and scope_rank(level) > scope_rank(ceiling):
        raise Forbidden(
            f"level {level!r} is above this store's read ceiling {ceiling!r}",
            code="above_ceiling",
        )
    # Under a secured posture an agent's owner is {agent, principal}: without the principal
    # the two-key partition cannot be kept, so the call fails instead of widening.
    if posture.require_principal and identity.agent is not None and identity.principal is None:
        raise Forbidden("this store requires X-Principal", code="principal_required")
    if level == "session" and identity.session is None:
        raise BadRequest("level 'session' needs the X-Session-Id header", code="unresolved_scope")
    if level == "agent" and identity.agent is None:
        raise BadRequest("level 'agent' needs the X-Agent-Identity header", code="unresolved_scope")
    if level == "user" and identity.principal is None:
        raise BadRequest("level 'user' needs the X-Principal header", code="unresolved_scope")
    if conversational and identity.session is None:
        raise BadRequest(
            "short_term and medium_term need the X-Session-Id header", code="missing_session"
        )
    principal = identity.principal if level in ("session", "agent", "user") else None
    return Scope(
        level=level,
        group=group,
        session=identity.session,
        principal=principal,
        agent=identity.agent if level == "agent" else None,
    )
