"""The memory settings tables are generated from the field docs, and every field has one.

The committed tables (``images/memory/SETTINGS.md``, which the docs site shows) must
equal what ``kaos_core.settings`` generates now; regenerate with ``hack/gen-docs``.
"""

from __future__ import annotations

from pathlib import Path

from kaos_core.settings import region, settings_markdown
from kaos_memory.settings import GROUPS, MemorySettings

ROOT = Path(__file__).resolve().parents[3]
REGION = "memory settings"


def test_every_setting_is_documented_in_a_group() -> None:
    # Every group but the limits and tracing every server shares (documented on their own
    # pages) has a table; every field a description.
    assert set(MemorySettings.groups()) - set(GROUPS) == {"limits", "telemetry"}
    for name, group_cls in MemorySettings.groups().items():
        for field, info in group_cls.model_fields.items():
            assert info.description, f"{name}.{field} has no description"


def test_the_committed_tables_are_the_generated_ones() -> None:
    committed = region((ROOT / "images/memory/SETTINGS.md").read_text(encoding="utf-8"), REGION)
    generated = settings_markdown(MemorySettings, GROUPS, heading="###").strip("\n")
    assert committed == generated, "images/memory/SETTINGS.md drifted: run hack/gen-docs"


def test_each_group_is_what_its_component_is_handed() -> None:
    settings = MemorySettings(token_budget=100, storage="local")
    assert settings.tiers.fold_trigger == 100 and settings.tiers.fold_target == 50
    assert settings.tiers.digest_max_tokens == 1024, "a small window's floor"
    assert MemorySettings(token_budget=4096).tiers.digest_max_tokens == 8192
    assert settings.backend.mode == "local" and settings.backend.group == "kaos_memory"
    models = MemorySettings(model_base_url="http://m/v1", embedding_base_url="http://e/v1").models
    assert (models.summarization_base_url, models.embedding_base_url) == (
        "http://m/v1",
        "http://e/v1",
    )
    keyed = MemorySettings(api_key="k", embedding_api_key="e").models
    assert (keyed.summarization_api_key, keyed.embedding_api_key) == ("k", "e")
    admin = MemorySettings(auth_api_server="https://api", store_name="s").admin
    assert (admin.api_server, admin.store_name) == ("https://api", "s")


def test_the_variable_names_are_unchanged() -> None:
    names = set(MemorySettings.env_names())
    assert len(names) == len(MemorySettings.env_names())
    assert {
        "KAOS_MEMORY_STORAGE",
        "KAOS_MEMORY_MODEL_TIMEOUT",
        "KAOS_MEMORY_EXECUTOR_WORKERS",
        "KAOS_MEMORY_DRAIN_TIMEOUT",
        "KAOS_MEMORY_ADMIN_REVIEW_CACHE_SECONDS",
        "KAOS_MEMORY_AUTH_MODE",
        "KAOS_MEMORY_CALLERS_FILE",
        "KAOS_MEMORY_USER_ISSUER",
        "KAOS_HTTP_IDLE_TIMEOUT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    } <= names
