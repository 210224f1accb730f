"""Settings of the memory service, read once from ``KAOS_MEMORY_*`` variables at start.

``MemorySettings`` is one object of groups, one per concern, each the typed settings one
component is handed (``kaos_memory.settings.service``); the groups live beside it, a
module each. ``load_memory_settings`` reads them from the environment.
"""

from __future__ import annotations

from kaos_core.settings import SettingsError

from kaos_memory.settings.access import AdminAccess, AdminSettings
from kaos_memory.settings.http import HttpSettings
from kaos_memory.settings.models import ModelSettings
from kaos_memory.settings.posture import PostureSettings, ReadCeiling
from kaos_memory.settings.retention import QuotaSettings, RetentionSettings
from kaos_memory.settings.service import GROUPS, MemorySettings, load_memory_settings
from kaos_memory.settings.storage import DEFAULT_COLLECTION, StorageSettings
from kaos_memory.settings.tiers import TierSettings
from kaos_memory.settings.work import ConsolidationSettings, ExecutorSettings

__all__ = [
    "DEFAULT_COLLECTION",
    "GROUPS",
    "AdminAccess",
    "AdminSettings",
    "ConsolidationSettings",
    "ExecutorSettings",
    "HttpSettings",
    "MemorySettings",
    "ModelSettings",
    "PostureSettings",
    "QuotaSettings",
    "ReadCeiling",
    "RetentionSettings",
    "SettingsError",
    "StorageSettings",
    "TierSettings",
    "load_memory_settings",
]
