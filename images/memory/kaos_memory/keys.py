"""Typed application keys of the memory service."""

from __future__ import annotations

from aiohttp import web
from kaos_core.telemetry.genai_metrics import GenAiMetrics

from kaos_memory.auth import MemoryAuth
from kaos_memory.deps import MemoryDeps
from kaos_memory.executor import BackgroundExecutor
from kaos_memory.metrics import MemoryMetrics
from kaos_memory.service import MemoryService
from kaos_memory.settings import MemorySettings
from kaos_memory.storage.base import ConversationStore, LongTermStore
from kaos_memory.sweeper import Sweeper

SETTINGS_KEY = web.AppKey("kaos_memory_settings", MemorySettings)
DEPS_KEY = web.AppKey("kaos_memory_deps", MemoryDeps)
METRICS_KEY = web.AppKey("kaos_memory_metrics", MemoryMetrics)
GENAI_METRICS_KEY = web.AppKey("kaos_memory_genai_metrics", GenAiMetrics)
CONVERSATION_KEY = web.AppKey("kaos_memory_conversation", ConversationStore)
LONGTERM_KEY = web.AppKey("kaos_memory_longterm", LongTermStore)
EXECUTOR_KEY = web.AppKey("kaos_memory_executor", BackgroundExecutor)
SERVICE_KEY = web.AppKey("kaos_memory_service", MemoryService)
# The replica's sweeper (tests run a sweep at the time they choose).
SWEEPER_KEY = web.AppKey("kaos_memory_sweeper", Sweeper)
# Only set when KAOS_MEMORY_AUTH_MODE is not ``off``.
AUTH_KEY = web.AppKey("kaos_memory_auth", MemoryAuth)
