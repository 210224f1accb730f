"""The memory service's settings: every group, read once from ``KAOS_MEMORY_*`` at start.

Each group is the typed object one component is handed (``http``, ``backend``, ``models``,
``tiers``, ``posture``, ``executor``, ``consolidation``, the caller and user identity of
``kaos_core.settings.auth``, ``admin_access``), besides the connection limits and tracing
every server reads. Everything is validated before anything starts: contradictory values
(a fold target above its trigger, external storage without a DSN) stop the process with one
line naming the variables. The tables in ``images/memory/SETTINGS.md`` are generated from
the fields (``hack/gen-docs``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar

from kaos_core.http.limits import HttpLimits
from kaos_core.settings import group, load_settings
from kaos_core.settings.auth import VerifiedIdentity
from kaos_core.telemetry.settings import TelemetrySettings

from kaos_memory.settings.access import AdminAccess, AdminSettings
from kaos_memory.settings.encryption import EncryptionSettings
from kaos_memory.settings.http import HttpSettings
from kaos_memory.settings.kms import KmsSettings
from kaos_memory.settings.models import ModelSettings
from kaos_memory.settings.posture import PostureSettings
from kaos_memory.settings.receipts import ReceiptSettings
from kaos_memory.settings.retention import QuotaSettings, RetentionSettings
from kaos_memory.settings.storage import StorageSettings
from kaos_memory.settings.tiers import TierSettings
from kaos_memory.settings.work import ConsolidationSettings, ExecutorSettings

# The collection variable of each storage mode, read when KAOS_MEMORY_COLLECTION is unset.
_MODE_COLLECTION_ENV = {
    "local": "KAOS_MEMORY_LOCAL_COLLECTION",
    "external": "KAOS_MEMORY_EXTERNAL_COLLECTION",
}

# Variables renamed since a release: the earlier name is read when the new one is unset.
_EARLIER_NAMES = {"KAOS_MEMORY_VECTOR_CACHE_MB": "KAOS_MEMORY_PG_VECTOR_CACHE_MB"}


class MemorySettings(VerifiedIdentity):
    """The memory service's settings, one group per concern (``callers`` and ``users``, the
    verified identities, come from ``VerifiedIdentity``)."""

    env_prefix: ClassVar[str] = "KAOS_MEMORY_"
    notes: ClassVar[Mapping[str, str]] = {
        "KAOS_MEMORY_AUTH_MODE": "On, every `/v1/*` request needs an `X-Agent-Token` (the"
        " agent's projected service-account token, audience `kaos.dev/memory`); `off`:"
        " identity headers are trusted as sent",
        "KAOS_MEMORY_CALLERS_FILE": "Here: the agents bound to this store",
        "KAOS_MEMORY_USER_ISSUER": "Set, the principal of an agent's call is the principal"
        " claim of the user token the agent forwards in `X-User-Token`, verified here too"
        " (this check is authoritative, the agent's is defence in depth): an `X-Principal`"
        " that differs is 403 `principal_mismatch`; without a user token the only principal"
        " accepted is the calling agent's own identity (a self-subjected run), anything else"
        " is 403 `principal_not_proven`",
    }

    http: HttpSettings = group(HttpSettings.title)
    backend: StorageSettings = group(StorageSettings.title)
    models: ModelSettings = group(ModelSettings.title)
    tiers: TierSettings = group(TierSettings.title)
    posture: PostureSettings = group(PostureSettings.title)
    executor: ExecutorSettings = group(ExecutorSettings.title)
    consolidation: ConsolidationSettings = group(ConsolidationSettings.title)
    admin_access: AdminAccess = group(AdminAccess.title)
    retention: RetentionSettings = group(RetentionSettings.title)
    quotas: QuotaSettings = group(QuotaSettings.title)
    receipts: ReceiptSettings = group(ReceiptSettings.title)
    encryption: EncryptionSettings = group(EncryptionSettings.title)
    kms: KmsSettings = group(KmsSettings.title)
    limits: HttpLimits = group(HttpLimits.title)
    telemetry: TelemetrySettings = group(TelemetrySettings.title)

    @property
    def admin(self) -> AdminSettings:
        access, callers = self.admin_access, self.callers
        return AdminSettings(
            store_namespace=access.store_namespace,
            store_name=access.store_name,
            api_server=callers.api_server,
            ca_file=callers.ca_file,
            token_file=callers.token_file,
            cache_seconds=access.review_cache_seconds,
        )

    def problems(self) -> list[str]:
        found = super().problems()
        if self.encryption.enabled and self.encryption.kek == "kms":
            found += self.kms.missing(self.prefix_of("kms"))
        return found


# The groups the settings tables document, in order, by title (the connection limits and
# tracing every server reads are documented once, on their own pages).
GROUPS: dict[str, str] = {
    name: MemorySettings.model_fields[name].title or name
    for name in (
        "http",
        "backend",
        "models",
        "tiers",
        "posture",
        "executor",
        "consolidation",
        "callers",
        "users",
        "admin_access",
        "retention",
        "quotas",
        "receipts",
        "encryption",
        "kms",
    )
}


def load_memory_settings(environ: Mapping[str, str] | None = None) -> MemorySettings:
    """Settings from the environment, honouring the per-mode collection variables and the
    earlier names of renamed variables."""
    env = dict(os.environ if environ is None else environ)
    for name, earlier in _EARLIER_NAMES.items():
        if not env.get(name) and env.get(earlier):
            env[name] = env[earlier]
    if not env.get("KAOS_MEMORY_COLLECTION"):
        storage = env.get("KAOS_MEMORY_STORAGE") or "local"
        alias = _MODE_COLLECTION_ENV.get(storage)
        if alias and env.get(alias):
            env["KAOS_MEMORY_COLLECTION"] = env[alias]
    return load_settings(MemorySettings, env)
