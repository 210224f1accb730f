"""What the store requires of a request, and how far an agent may read."""

from __future__ import annotations

from typing import ClassVar, Literal

from kaos_core.memory.contract import FailureMode
from kaos_core.settings import SettingsGroup, setting

ReadCeiling = Literal["session", "agent", "user"]


class PostureSettings(SettingsGroup):
    title: ClassVar[str] = "Scope and posture"

    max_read_scope: ReadCeiling = setting(
        "store ceiling for agents' reads and forgets: `session` < `agent` < `user`; a level"
        " above it is 403 (admin calls, without `X-Agent-Identity`, are not bound by it, and"
        " `store` is administrative and outside the order: only for admin calls)",
        default="agent",
    )
    require_principal: bool = setting(
        "a write without `X-Principal` is 403; an agent's read/forget at"
        " `session`/`agent`/`user` level without `X-Principal` is 403 too (the two-key"
        " partition cannot be kept without it); admin calls are exempt",
        default=False,
    )
    require_agent_identity: bool = setting(
        "a write without `X-Agent-Identity` is 403", default=False
    )
    default_failure_mode: FailureMode = setting(
        "failure mode of write and forget when the request gives none: `soft` answers 2xx"
        " with `degraded: true`; `strict` answers 500 (a strict write also fails, writing"
        " nothing, when the vector store does not answer or background work cannot be"
        " queued). Recall and list are always soft",
        default="soft",
    )
