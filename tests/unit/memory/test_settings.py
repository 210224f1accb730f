"""Memory settings: defaults, the fold invariant, mode requirements, the seed's aliases."""

from __future__ import annotations

import pytest
from kaos_core.settings import SettingsError
from kaos_memory.settings import load_memory_settings


def test_defaults() -> None:
    s = load_memory_settings({})
    assert s.storage == "local"
    assert s.port == 8080
    assert s.token_budget == 4096
    assert s.max_events == 2000
    assert s.effective_fold_trigger == 4096
    assert s.effective_fold_target == 2048
    assert s.digest_retention == 20
    assert s.max_read_scope == "agent"
    assert s.default_failure_mode == "soft"
    assert s.max_body_bytes == 1024 * 1024
    assert s.collection == s.group == "kaos_memory"


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
    assert (s.effective_fold_target, s.effective_fold_trigger) == (200, 800)


def test_external_needs_dsn() -> None:
    with pytest.raises(SettingsError, match="KAOS_MEMORY_DSN"):
        load_memory_settings({"KAOS_MEMORY_STORAGE": "external"})
    s = load_memory_settings(
        {"KAOS_MEMORY_STORAGE": "external", "KAOS_MEMORY_DSN": "postgresql://x@h/db"}
    )
    assert s.dsn == "postgresql://x@h/db"


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


def test_seed_collection_aliases() -> None:
    local = load_memory_settings({"KAOS_MEMORY_LOCAL_COLLECTION": "team_a"})
    assert local.collection == "team_a"
    external = load_memory_settings(
        {
            "KAOS_MEMORY_STORAGE": "external",
            "KAOS_MEMORY_DSN": "postgresql://x@h/db",
            "KAOS_MEMORY_EXTERNAL_COLLECTION": "team_b",
            "KAOS_MEMORY_LOCAL_COLLECTION": "ignored",
        }
    )
    assert external.collection == "team_b"
    explicit = load_memory_settings(
        {"KAOS_MEMORY_COLLECTION": "main", "KAOS_MEMORY_LOCAL_COLLECTION": "other"}
    )
    assert explicit.collection == "main"


def test_a_renamed_variable_is_read_under_its_earlier_name_unless_the_new_one_is_set() -> None:
    assert load_memory_settings({}).vector_cache_mb == 256
    earlier = {"KAOS_MEMORY_PG_VECTOR_CACHE_MB": "64"}
    assert load_memory_settings(earlier).vector_cache_mb == 64
    both = {**earlier, "KAOS_MEMORY_VECTOR_CACHE_MB": "0"}
    assert load_memory_settings(both).vector_cache_mb == 0
    with pytest.raises(SettingsError, match="KAOS_MEMORY_VECTOR_CACHE_MB"):
        load_memory_settings({"KAOS_MEMORY_PG_VECTOR_CACHE_MB": "lots"})
