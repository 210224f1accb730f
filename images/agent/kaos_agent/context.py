"""The verified context of one agent run, handed to every tool as pydantic-ai ``deps``.

Identity (principal, session) and the delegation depth come from request headers or the
autonomous scheduler, never from model output: tools read them from here and have no
parameters through which a model could choose them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class RunDeps:
    """Who a run acts for and where it sits in a delegation chain."""

    session_id: str
    principal: str | None = None
    depth: int = 0
    request_id: str | None = None
    # True when the session id was minted here because the caller sent none.
    ephemeral_session: bool = False
    autonomous: bool = False


def new_session_id() -> str:
    return "s-" + uuid.uuid4().hex
