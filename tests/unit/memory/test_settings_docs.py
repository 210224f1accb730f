"""The memory settings tables are generated from the field docs, and every field has one.

The committed tables (``images/memory/SETTINGS.md`` and the README's memory settings
region) must equal what ``kaos_core.settings`` generates now; regenerate with
``hack/gen-docs``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kaos_core.settings import region, settings_markdown
from kaos_memory.settings import GROUPS, MemorySettings

ROOT = Path(__file__).resolve().parents[3]
REGION = "memory settings"


def test_every_setting_is_documented_in_a_group() -> None:
    for name, info in MemorySettings.model_fields.items():
        extra = info.json_schema_extra
        assert isinstance(extra, dict) and extra.get("group") in GROUPS, name
        assert info.description, f"{name} has no description"


@pytest.mark.parametrize("doc", ["images/memory/SETTINGS.md", "README.md"])
def test_the_committed_tables_are_the_generated_ones(doc: str) -> None:
    committed = region((ROOT / doc).read_text(encoding="utf-8"), REGION)
    generated = settings_markdown(MemorySettings, GROUPS, heading="###").strip("\n")
    assert committed == generated, f"{doc} drifted from the settings: run hack/gen-docs"


def test_each_view_carries_its_group() -> None:
    settings = MemorySettings(token_budget=100, storage="local")
    assert settings.tiers.fold_trigger == 100 and settings.tiers.fold_target == 50
    assert settings.tiers.digest_max_tokens == 1024, "a small window's floor"
    assert MemorySettings(token_budget=4096).tiers.digest_max_tokens == 8192
    assert settings.models.answer_retries == settings.answer_retries
    assert settings.backend.mode == "local" and settings.backend.group == settings.collection
    assert settings.executor.workers == settings.executor_workers
    assert settings.consolidation.lease_ttl == settings.lease_ttl
    assert settings.posture.max_read_scope == settings.max_read_scope
    assert settings.models.timeout == settings.model_timeout
    assert settings.http.port == settings.port
