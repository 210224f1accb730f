"""Memory settings: defaults, the fold invariant, mode requirements, the per-mode collection
variables."""

from __future__ import annotations

import pytest
from kaos_core.settings import SettingsError
from kaos_memory.settings import MemorySettings, load_memory_settings


def test_defaults() -> None:
    s = load_memory_settings({})
    assert s.backend.mode == "local"
    assert s.http.port == 8080
    assert s.tiers.token_budget == 4096
    assert s.tiers.max_events == 2000
    assert s.tiers.fold_trigger == 4096
    assert s.tiers.fold_target == 2048
    assert s.tiers.digest_retention == 20
    assert s.posture.max_read_scope == "agent"
    assert s.posture.default_failure_mode == "soft"
    assert s.http.max_body_bytes == 1024 * 1024
    assert s.backend.collection == s.backend.group == "kaos_memory"


@pytest.mark.parametrize(
    "env",
    [
        {"KAOS_MEMORY_FOLD_TARGET": "3000", "KAOS_MEMORY_FOLD_TRIGGER": "2000"},
        {"KAOS_MEMORY_FOLD_TRIGGER": "5000"},
        {"KAOS_MEMORY_FOLD_TARGET": "4096"},
        {"KAOS_MEMORY_TOKEN_BUDGET": "100", "KAOS_MEMORY_FOLD_TARGET": "100"},
    ],
)
def test_fold_invariant_names_the_variables(env: dict[str, str]) -> None:
    with pytest.raises(SettingsError) as err:
        load_memory_settings(env)
    message = str(err.value)
    for name in ("KAOS_MEMORY_FOLD_TARGET", "KAOS_MEMORY_FOLD_TRIGGER", "KAOS_MEMORY_TOKEN_BUDGET"):
        assert name in message


def test_fold_settings_accepted_when_ordered() -> None:
    s = load_memory_settings(
        {
            "KAOS_MEMORY_TOKEN_BUDGET": "1000",
            "KAOS_MEMORY_FOLD_TRIGGER": "800",
            "KAOS_MEMORY_FOLD_TARGET": "200",
        }
    )
    assert (s.tiers.fold_target, s.tiers.fold_trigger) == (200, 800)


def test_external_needs_dsn() -> None:
    with pytest.raises(SettingsError, match="KAOS_MEMORY_DSN"):
        load_memory_settings({"KAOS_MEMORY_STORAGE": "external"})
    s = load_memory_settings(
        {"KAOS_MEMORY_STORAGE": "external", "KAOS_MEMORY_DSN": "postgresql://x@h/db"}
    )
    assert s.backend.dsn == "postgresql://x@h/db"


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"KAOS_MEMORY_PORT": "http"}, "KAOS_MEMORY_PORT"),
        ({"KAOS_MEMORY_STORAGE": "redis"}, "KAOS_MEMORY_STORAGE"),
        ({"KAOS_MEMORY_MAX_READ_SCOPE": "store"}, "KAOS_MEMORY_MAX_READ_SCOPE"),
        ({"KAOS_MEMORY_DEFAULT_FAILURE_MODE": "loud"}, "KAOS_MEMORY_DEFAULT_FAILURE_MODE"),
        ({"KAOS_MEMORY_COLLECTION": "bad name!"}, "KAOS_MEMORY_COLLECTION"),
        ({"KAOS_MEMORY_EXECUTOR_QUEUE_SIZE": "0"}, "KAOS_MEMORY_EXECUTOR_QUEUE_SIZE"),
    ],
)
def test_bad_values_name_their_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(SettingsError, match=variable):
        load_memory_settings(env)


def test_per_mode_collection_variables() -> None:
    local = load_memory_settings({"KAOS_MEMORY_LOCAL_COLLECTION": "team_a"})
    assert local.backend.collection == "team_a"
    external = load_memory_settings(
        {
            "KAOS_MEMORY_STORAGE": "external",
            "KAOS_MEMORY_DSN": "postgresql://x@h/db",
            "KAOS_MEMORY_EXTERNAL_COLLECTION": "team_b",
            "KAOS_MEMORY_LOCAL_COLLECTION": "ignored",
        }
    )
    assert external.backend.collection == "team_b"
    explicit = load_memory_settings(
        {"KAOS_MEMORY_COLLECTION": "main", "KAOS_MEMORY_LOCAL_COLLECTION": "other"}
    )
    assert explicit.backend.collection == "main"


def test_a_renamed_variable_is_read_under_its_earlier_name_unless_the_new_one_is_set() -> None:
    assert load_memory_settings({}).backend.vector_cache_mb == 256
    earlier = {"KAOS_MEMORY_PG_VECTOR_CACHE_MB": "64"}
    assert load_memory_settings(earlier).backend.vector_cache_mb == 64
    both = {**earlier, "KAOS_MEMORY_VECTOR_CACHE_MB": "0"}
    assert load_memory_settings(both).backend.vector_cache_mb == 0
    with pytest.raises(SettingsError, match="KAOS_MEMORY_VECTOR_CACHE_MB"):
        load_memory_settings({"KAOS_MEMORY_PG_VECTOR_CACHE_MB": "lots"})


def test_keyword_names_build_the_groups_and_settings_are_read_through_them() -> None:
    # Keyword names (the variable without KAOS_MEMORY_) build the settings, as the
    # benchmarks and test helpers do; reading is typed, through the groups only.
    s = MemorySettings(token_budget=100, storage="local", executor_workers=3)
    assert (s.tiers.token_budget, s.backend.mode, s.executor.workers) == (100, "local", 3)
    assert s.backend.mem0_dir == s.backend.data_dir / "mem0"
    for flat in ("token_budget", "storage", "executor_workers", "mem0_dir", "no_such_setting"):
        with pytest.raises(AttributeError):
            getattr(s, flat)
