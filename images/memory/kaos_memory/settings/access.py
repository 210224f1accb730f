"""Admin access: which MemoryStore the Kubernetes RBAC decisions are about
(``kaos_memory.admin``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from kaos_core.auth.config import REVIEW_CACHE_SECONDS
from kaos_core.settings import SettingsGroup, setting


class AdminAccess(SettingsGroup):
    """The store admin calls are reviewed against, and for how long an answer holds."""

    title: ClassVar[str] = "Admin access (Kubernetes RBAC)"

    store_namespace: str | None = setting(
        "the namespace of this service's MemoryStore (set by the operator). With"
        " `KAOS_MEMORY_AUTH_MODE` on, a call without `X-Agent-Token` but with"
        " `Authorization: Bearer <Kubernetes credential>` is an admin call: the API server"
        " (`KAOS_MEMORY_AUTH_API_SERVER`) reviews the credential (TokenReview) and whether"
        " its user may `get` (recall, list, audit) or `delete` (forget)"
        " `memorystores/data` (group `kaos.tools`) of this store (SubjectAccessReview; the"
        " ServiceAccount needs `create` on both: the chart's `<release>-memory-review`);"
        " unset, admin calls are 403 `admin_not_configured`",
        default=None,
        min_length=1,
        max_length=63,
    )
    store_name: str | None = setting(
        "the name of this service's MemoryStore (set by the operator), for the same review",
        default=None,
        min_length=1,
        max_length=253,
    )
    review_cache_seconds: float = setting(
        "seconds an admin credential's TokenReview and SubjectAccessReview answers are"
        " reused (never past the credential's `exp`): a revoked binding takes effect within"
        " this time",
        env="ADMIN_REVIEW_CACHE_SECONDS",
        default=REVIEW_CACHE_SECONDS,
        ge=0,
        le=300,
    )


@dataclass(frozen=True)
class AdminSettings:
    """What the admin gate is built from: the store RBAC decides on, and the API server
    (the caller-auth settings' own) that reviews credentials."""

    store_namespace: str | None
    store_name: str | None
    api_server: str | None
    ca_file: Path | None
    token_file: Path | None
    cache_seconds: float = REVIEW_CACHE_SECONDS
