"""A MemoryStore's retention and quotas reach the memory service as the settings it loads."""

from __future__ import annotations

from kaos_memory.settings import load_memory_settings
from kaos_operator.desired import MemoryStoreContext, memory_store_env

from tests.support.operator_objects import IMAGES, OPEN, store

RETENTION_VARS = {
    "KAOS_MEMORY_FACT_MAX_AGE_DAYS",
    "KAOS_MEMORY_IDLE_SESSION_DAYS",
    "KAOS_MEMORY_QUOTA_FACTS",
    "KAOS_MEMORY_QUOTA_TURNS",
    "KAOS_MEMORY_QUOTA_BYTES",
    "KAOS_MEMORY_QUOTA_WRITES_PER_MINUTE",
}


def ctx() -> MemoryStoreContext:
    return MemoryStoreContext(
        images=IMAGES,
        posture=OPEN,
        model_api_url="http://llm.ns.svc:4000",
        summarization_model="sum",
        embedding_model="emb",
    )


def test_retention_and_quotas_are_rendered_and_loaded_by_the_service() -> None:
    s = store(
        retention={"factMaxAgeDays": 90, "idleSessionDays": 30},
        quotas={
            "principal": {"facts": 500, "turns": 10000, "bytes": 5000000},
            "agent": {"writesPerMinute": 120},
        },
    )
    env = memory_store_env(s, ctx())
    assert {k: env[k] for k in RETENTION_VARS} == {
        "KAOS_MEMORY_FACT_MAX_AGE_DAYS": "90",
        "KAOS_MEMORY_IDLE_SESSION_DAYS": "30",
        "KAOS_MEMORY_QUOTA_FACTS": "500",
        "KAOS_MEMORY_QUOTA_TURNS": "10000",
        "KAOS_MEMORY_QUOTA_BYTES": "5000000",
        "KAOS_MEMORY_QUOTA_WRITES_PER_MINUTE": "120",
    }
    settings = load_memory_settings(env)
    assert settings.retention.fact_max_age == 90 * 86400
    assert settings.retention.idle_session_age == 30 * 86400
    quotas = settings.quotas
    assert (quotas.quota_facts, quotas.quota_turns, quotas.quota_bytes) == (500, 10000, 5000000)
    assert quotas.quota_writes_per_minute == 120


def test_a_partial_spec_renders_only_what_it_sets() -> None:
    s = store(retention={"idleSessionDays": 7}, quotas={"agent": {"writesPerMinute": 10}})
    env = memory_store_env(s, ctx())
    assert {k: env[k] for k in RETENTION_VARS if k in env} == {
        "KAOS_MEMORY_IDLE_SESSION_DAYS": "7",
        "KAOS_MEMORY_QUOTA_WRITES_PER_MINUTE": "10",
    }
    settings = load_memory_settings(env)
    assert settings.retention.fact_max_age is None
    assert settings.quotas.quota_turns is None


def test_without_retention_or_quotas_nothing_is_rendered() -> None:
    env = memory_store_env(store(), ctx())
    assert RETENTION_VARS.isdisjoint(env)
