"""The verified context of one agent run, handed to every tool as pydantic-ai ``deps``.

Identity (principal, session), the delegation depth and the request id come from request
headers or the autonomous scheduler, never from model output: tools read them from here
and have no parameters through which a model could choose them. ``run_context`` is the
one parser, used by chat completions, A2A and the autonomous loop, so every entry point
accepts and refuses the same values: each identity header and the delegation depth at
most once, identity as printable UTF-8 text (``kaos_core.wire``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from kaos_core.auth.callers import Caller
from kaos_core.errors import BadRequest
from kaos_core.wire import (
    DELEGATION_DEPTH_HEADER,
    SESSION_HEADER,
    header_values,
    parse_identity,
    validate_subject,
)

# The widest depth a caller may claim. Deeper calls are not an error of this agent's
# making (its own limit, MAX_DELEGATION_DEPTH, stops it delegating further); a value
# outside this range is a malformed request and refused.
MAX_DEPTH_VALUE = 1000
_INT_RE = re.compile(r"^-?[0-9]{1,9}$")


@dataclass(frozen=True)
class RunDeps:
    """Who a run acts for and where it sits in a delegation chain."""

    session_id: str
    principal: str | None = None
    depth: int = 0
    # The id of the request that started the run; memory calls and delegations carry it.
    request_id: str | None = None
    # Under verified user identity: the user's token, forwarded to the memory service and
    # to peers so they verify the principal themselves. A credential: never in a repr.
    user_token: str | None = field(default=None, repr=False)
    # The A2A task the run works on (None for chat completions and the autonomous loop).
    task_id: str | None = None
    # The verified identity of the agent that delegated the run (None: not a delegation, or
    # delegations are not verified).
    caller: str | None = None

    def with_task(self, task_id: str) -> RunDeps:
        """This context for the run of the A2A task ``task_id``."""
        return replace(self, task_id=task_id)


@dataclass(frozen=True)
class Verified:
    """What the edge proved about a request (``kaos_agent.auth``): the delegating agent,
    and the principal when the posture derives it (then ``X-Principal`` is not used)."""

    caller: Caller | None = None
    derived: bool = False
    principal: str | None = None
    user_token: str | None = field(default=None, repr=False)


class BadDelegationDepth(BadRequest):
    code = "bad_delegation_depth"


def new_session_id() -> str:
    return "s-" + uuid.uuid4().hex


def parse_depth(raw: object) -> int:
    """A delegation depth as sent by a caller: an integer from 0 to ``MAX_DEPTH_VALUE``."""
    depth: int | None = None
    if isinstance(raw, bool):
        depth = None
    elif isinstance(raw, int):
        depth = raw
    elif isinstance(raw, float) and raw.is_integer():
        depth = int(raw)  # JSON numbers in protobuf metadata arrive as doubles
    elif isinstance(raw, str) and _INT_RE.fullmatch(raw):  # not match: "5\n" is no integer
        depth = int(raw)
    if depth is None:
        raise BadDelegationDepth(f"{DELEGATION_DEPTH_HEADER} must be an integer")
    if not 0 <= depth <= MAX_DEPTH_VALUE:
        raise BadDelegationDepth(
            f"{DELEGATION_DEPTH_HEADER} must be between 0 and {MAX_DEPTH_VALUE}"
        )
    return depth


def run_context(
    headers: Mapping[str, str],
    *,
    request_id: str | None,
    session: str | None = None,
    depth: object = None,
    verified: Verified | None = None,
) -> RunDeps:
    """The run context of one request; raises ``BadRequest`` for an unusable value.

    ``headers`` are the request's (or, for the autonomous loop, the scheduler's own);
    ``session`` and ``depth`` are fallbacks a protocol may carry in its body (A2A's
    ``contextId`` and ``kaos.delegationDepth`` metadata), used only when the header is
    absent and validated exactly as the header would be. Without any session a fresh id
    is minted. ``verified``: what the edge proved; a derived principal replaces the
    header's (which the edge has refused by then).
    """
    identity = parse_identity(headers)
    if identity.session is None and session is not None:
        session = validate_subject(SESSION_HEADER, session)
    else:
        session = identity.session
    raw_depth: object = _single(headers, DELEGATION_DEPTH_HEADER)
    if raw_depth is None:
        raw_depth = 0 if depth is None else depth
    derived = verified is not None and verified.derived
    return RunDeps(
        session_id=session or new_session_id(),
        principal=verified.principal if verified is not None and derived else identity.principal,
        depth=parse_depth(raw_depth),
        request_id=request_id or None,
        user_token=verified.user_token if verified is not None and derived else None,
        caller=verified.caller.identity if verified is not None and verified.caller else None,
    )


def _single(headers: Mapping[str, str], name: str) -> str | None:
    values = header_values(headers, name)
    if len(values) > 1:
        raise BadDelegationDepth(f"{name} given more than once")
    return values[0] if values else None
