"""A MemoryStore's desired objects and KAOS_MEMORY_* environment, local and external."""

from __future__ import annotations

from kaos_memory.settings import MemorySettings
from kaos_operator.desired import MemoryStoreContext, desired_memorystore_objects, memory_store_env

from tests.support.operator_objects import IMAGES, OPEN, USER_IDENTITY, by_kind, env_of, store


def ctx(**kw: object) -> MemoryStoreContext:
    base: dict[str, object] = {
        "images": IMAGES,
        "posture": OPEN,
        "model_api_url": "http://llm.ns.svc:4000",
        "summarization_model": "sum",
        "embedding_model": "emb",
    }
    return MemoryStoreContext(**{**base, **kw})  # type: ignore[arg-type]


EXTERNAL = {"storage": {"type": "external", "connectionSecret": {"name": "pg", "key": "dsn"}}}


def test_local_store_objects() -> None:
    objs = by_kind(desired_memorystore_objects(store("mem"), ctx()))
    assert set(objs) == {"Deployment", "Service", "PersistentVolumeClaim"}
    dep = objs["Deployment"]
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    pod = dep["spec"]["template"]["spec"]
    assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "mem-data"}}]
    assert pod["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data/memory"}]
    pvc = objs["PersistentVolumeClaim"]
    assert pvc["metadata"]["name"] == "mem-data"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert objs["Service"]["spec"]["ports"][0]["port"] == 8080
    assert "KAOS_MEMORY_DSN" not in env_of(dep)


def test_local_store_storage_class_and_size() -> None:
    s = store(storage={"type": "local", "size": "5Gi", "storageClassName": "fast"})
    pvc = by_kind(desired_memorystore_objects(s, ctx()))["PersistentVolumeClaim"]
    assert pvc["spec"]["storageClassName"] == "fast"
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"


def test_external_store_objects() -> None:
    objs = by_kind(desired_memorystore_objects(store("mem", **EXTERNAL), ctx()))
    assert set(objs) == {"Deployment", "Service", "PodDisruptionBudget"}
    dep = objs["Deployment"]
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["strategy"] == {"type": "RollingUpdate"}
    env = env_of(dep)
    assert env["KAOS_MEMORY_STORAGE"] == "external"
    assert env["KAOS_MEMORY_DSN"] == {"secretKeyRef": {"name": "pg", "key": "dsn"}}
    pdb = objs["PodDisruptionBudget"]
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    assert "podAntiAffinity" in dep["spec"]["template"]["spec"]["affinity"]


def test_external_single_replica_has_no_pdb() -> None:
    objs = by_kind(desired_memorystore_objects(store(**EXTERNAL, replicas=1), ctx()))
    assert "PodDisruptionBudget" not in objs
    assert objs["Deployment"]["spec"]["replicas"] == 1


def test_env_projects_the_spec() -> None:
    s = store(
        collection="team_a",
        maxReadScope="user",
        defaultFailureMode="strict",
        models={
            "summarization": {"modelAPI": "llm", "model": "sum"},
            "embedding": {"modelAPI": "llm", "model": "emb", "dimensions": 64},
        },
        tiers={
            "shortTerm": {
                "tokenBudget": 8000,
                "foldTriggerTokens": 6000,
                "foldTargetTokens": 3000,
                "maxEvents": 500,
                "idleFlushSeconds": 0,
            },
            "mediumTerm": {"digestRetention": 7, "digestMaxTokens": 1024},
            "longTerm": {"recallTopK": 3},
        },
    )
    env = memory_store_env(s, ctx(posture=USER_IDENTITY))
    assert env == {
        "KAOS_MEMORY_HOST": "0.0.0.0",
        "KAOS_MEMORY_PORT": "8080",
        "KAOS_MEMORY_STORAGE": "local",
        "KAOS_MEMORY_DATA_DIR": "/data/memory",
        "KAOS_MEMORY_COLLECTION": "team_a",
        "KAOS_MEMORY_MODEL_BASE_URL": "http://llm.ns.svc:4000/v1",
        "KAOS_MEMORY_EMBEDDING_BASE_URL": "http://llm.ns.svc:4000/v1",
        "KAOS_MEMORY_SUMMARIZATION_MODEL": "sum",
        "KAOS_MEMORY_EMBEDDING_MODEL": "emb",
        "KAOS_MEMORY_EMBEDDING_DIMS": "64",
        "KAOS_MEMORY_TOKEN_BUDGET": "8000",
        "KAOS_MEMORY_FOLD_TRIGGER": "6000",
        "KAOS_MEMORY_FOLD_TARGET": "3000",
        "KAOS_MEMORY_LONG_TERM_ENABLED": "true",
        "KAOS_MEMORY_MAX_EVENTS": "500",
        "KAOS_MEMORY_IDLE_FLUSH_SECONDS": "0",
        "KAOS_MEMORY_DIGEST_RETENTION": "7",
        "KAOS_MEMORY_RECALL_TOP_K": "3",
        "KAOS_MEMORY_DIGEST_MAX_TOKENS": "1024",
        "KAOS_MEMORY_INJECT_SOURCES": "user,saved",
        "KAOS_MEMORY_MAX_READ_SCOPE": "user",
        "KAOS_MEMORY_DEFAULT_FAILURE_MODE": "strict",
        "KAOS_MEMORY_REQUIRE_PRINCIPAL": "true",
        "KAOS_MEMORY_REQUIRE_AGENT_IDENTITY": "true",
    }


def test_env_is_accepted_by_the_memory_service_settings() -> None:
    """The projected environment loads in the service's own settings, field for field."""
    s = store(tiers={"shortTerm": {"tokenBudget": 1000, "foldTargetTokens": 100}})
    env = memory_store_env(s, ctx())
    settings = MemorySettings.from_env(env)
    assert settings.tiers.token_budget == 1000
    assert settings.tiers.fold_target == 100
    assert settings.models.model_base_url == "http://llm.ns.svc:4000/v1"
    unknown = [k for k in env if k not in MemorySettings.env_names()]
    assert unknown == []


# -- per-role model bindings and store tuning ---------------------------------------------

TWO_APIS = {
    "summarization": {
        "modelAPI": "hosted",
        "model": "gpt",
        "apiKeySecret": {"name": "llm-key", "key": "token"},
    },
    "embedding": {"modelAPI": "local-emb", "model": "bge", "dimensions": 384},
}


def test_each_role_gets_its_own_endpoint_and_key() -> None:
    s = store(models=TWO_APIS)
    c = ctx(
        model_api_url="http://hosted.ns.svc:4000",
        embedding_model_api_url="http://local-emb.ns.svc:8000/v1",
        summarization_model="gpt",
        embedding_model="bge",
    )
    env = memory_store_env(s, c)
    assert env["KAOS_MEMORY_MODEL_BASE_URL"] == "http://hosted.ns.svc:4000/v1"
    assert env["KAOS_MEMORY_EMBEDDING_BASE_URL"] == "http://local-emb.ns.svc:8000/v1"
    assert env["KAOS_MEMORY_EMBEDDING_DIMS"] == "384"
    pod_env = env_of(by_kind(desired_memorystore_objects(s, c))["Deployment"])
    # The key comes from the role's Secret, never as a value; the other role has none.
    assert pod_env["KAOS_MEMORY_SUMMARIZATION_API_KEY"] == {
        "secretKeyRef": {"name": "llm-key", "key": "token"}
    }
    assert "KAOS_MEMORY_EMBEDDING_API_KEY" not in pod_env
    # The service resolves each role to its own endpoint.
    models = MemorySettings.from_env(env).models
    assert models.summarization_base_url == "http://hosted.ns.svc:4000/v1"
    assert models.embedding_base_url == "http://local-emb.ns.svc:8000/v1"


def test_one_model_api_for_both_roles_by_default() -> None:
    env = memory_store_env(store(), ctx())
    assert env["KAOS_MEMORY_EMBEDDING_BASE_URL"] == env["KAOS_MEMORY_MODEL_BASE_URL"]


def test_store_tuning_is_projected_and_loads() -> None:
    s = store(
        maxConcurrentRequests=32,
        tiers={
            "mediumTerm": {"digestPrompt": "Summarise tersely."},
            "longTerm": {
                "enabled": False,
                "scoreThreshold": 0.35,
                "extractionPrompt": "Never keep phone numbers.",
                "extractionSystemPrompt": "compact",
                "extractionConcurrency": 4,
            },
        },
    )
    env = memory_store_env(s, ctx())
    assert {k: env[k] for k in env if k in TUNING} == {
        "KAOS_MEMORY_LONG_TERM_ENABLED": "false",
        "KAOS_MEMORY_RECALL_THRESHOLD": "0.35",
        "KAOS_MEMORY_DIGEST_PROMPT": "Summarise tersely.",
        "KAOS_MEMORY_EXTRACTION_PROMPT": "Never keep phone numbers.",
        "KAOS_MEMORY_EXTRACTION_SYSTEM_PROMPT": "compact",
        "KAOS_MEMORY_EXTRACTION_CONCURRENCY": "4",
        "KAOS_MEMORY_MAX_CONCURRENT_REQUESTS": "32",
    }
    settings = MemorySettings.from_env(env)
    assert settings.tiers.long_term_enabled is False
    assert settings.tiers.recall_threshold == 0.35
    assert settings.models.digest_prompt == "Summarise tersely."
    assert settings.models.extraction_prompt == "Never keep phone numbers."
    assert settings.models.extraction_system_prompt == "compact"
    assert settings.consolidation.extraction_concurrency == 4
    assert settings.http.max_concurrent_requests == 32


TUNING = {
    "KAOS_MEMORY_LONG_TERM_ENABLED",
    "KAOS_MEMORY_RECALL_THRESHOLD",
    "KAOS_MEMORY_DIGEST_PROMPT",
    "KAOS_MEMORY_EXTRACTION_PROMPT",
    "KAOS_MEMORY_EXTRACTION_SYSTEM_PROMPT",
    "KAOS_MEMORY_EXTRACTION_CONCURRENCY",
    "KAOS_MEMORY_MAX_CONCURRENT_REQUESTS",
}


def test_unset_tuning_leaves_the_service_defaults() -> None:
    env = memory_store_env(store(), ctx())
    assert {k for k in env if k in TUNING} == {"KAOS_MEMORY_LONG_TERM_ENABLED"}
    settings = MemorySettings.from_env(env)
    assert settings.tiers.long_term_enabled is True
    assert settings.http.max_concurrent_requests == 0
