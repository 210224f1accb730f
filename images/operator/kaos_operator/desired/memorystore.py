"""A MemoryStore's desired objects and the ``KAOS_MEMORY_*`` environment of its service.

Local storage: one replica (the embedded store is a single-writer file) on one
PersistentVolumeClaim, replaced with the Recreate strategy so two pods never open it.
External storage: stateless replicas (two by default) spread over nodes, guarded by a
PodDisruptionBudget, with the DSN read from the referenced Secret.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kaos_core.crds.common import SecretKeyRef, Telemetry
from kaos_core.crds.memorystore import (
    AgentQuota,
    MemoryStore,
    PrincipalQuota,
    StoreQuotas,
    StoreRetention,
)

from kaos_operator.desired import egress, security
from kaos_operator.desired.common import (
    MEMORY_PORT,
    NONROOT_UID,
    Obj,
    bool_env,
    claim,
    container,
    deployment,
    disruption_budget,
    env_list,
    http_probe,
    pre_stop_sleep,
    restricted_security_context,
    selector_labels,
    service,
    service_url,
)
from kaos_operator.desired.overrides import TELEMETRY_PREFIX, reserved_prefixes, with_overrides
from kaos_operator.desired.telemetry import telemetry_env
from kaos_operator.settings import Images, Posture

DATA_DIR = "/data/memory"
DSN_ENV = "KAOS_MEMORY_DSN"
# spec.receipts.keySecret: the one key of that Secret, mounted as a file the service reads.
RECEIPT_KEY_ENV = "KAOS_MEMORY_RECEIPT_KEY_FILE"
RECEIPT_KEY_VOLUME = "receipt-key"
RECEIPT_KEY_DIR = "/etc/kaos/receipts"
RECEIPT_KEY_FILE = "receipt-key.pem"
# Each model role's key, from the Secret its role names (models.<role>.apiKeySecret).
ROLE_KEY_ENV = {
    "summarization": "KAOS_MEMORY_SUMMARIZATION_API_KEY",
    "embedding": "KAOS_MEMORY_EMBEDDING_API_KEY",
}


@dataclass(frozen=True)
class MemoryStoreContext:
    """The store's resolved model bindings plus the operator's posture and images."""

    images: Images
    posture: Posture
    # The summarisation role's ModelAPI endpoint; the service gets it with /v1.
    model_api_url: str
    summarization_model: str
    embedding_model: str
    # The embedding role's ModelAPI endpoint when it names another ModelAPI.
    embedding_model_api_url: str | None = None
    listen_host: str = "0.0.0.0"
    listen_port: int = MEMORY_PORT
    data_dir: str = DATA_DIR
    # With security on: the Agents bound to the store (``security.agents_bound_to``).
    callers: tuple[str, ...] = ()
    # The chart's tracing default; the resource's spec.telemetry overrides it field by field.
    telemetry: Telemetry = field(default_factory=Telemetry)


def memory_store_endpoint(namespace: str, name: str) -> str:
    return service_url(name, namespace, MEMORY_PORT)


def pvc_name(store: MemoryStore) -> str:
    return f"{store.name}-data"


def openai_base_url(model_api_url: str) -> str:
    url = model_api_url.rstrip("/")
    return url if url.endswith("/v1") else url + "/v1"


def retention_env(
    retention: StoreRetention | None, quotas: StoreQuotas | None
) -> dict[str, int | None]:
    """The service's retention and quota variables (None: unset, the service's default)."""
    kept = retention or StoreRetention()
    principal = (quotas.principal if quotas else None) or PrincipalQuota()
    agent = (quotas.agent if quotas else None) or AgentQuota()
    return {
        "KAOS_MEMORY_FACT_MAX_AGE_DAYS": kept.fact_max_age_days,
        "KAOS_MEMORY_IDLE_SESSION_DAYS": kept.idle_session_days,
        "KAOS_MEMORY_QUOTA_FACTS": principal.facts,
        "KAOS_MEMORY_QUOTA_TURNS": principal.turns,
        "KAOS_MEMORY_QUOTA_BYTES": principal.bytes,
        "KAOS_MEMORY_QUOTA_WRITES_PER_MINUTE": agent.writes_per_minute,
    }


def memory_store_env(store: MemoryStore, ctx: MemoryStoreContext) -> dict[str, str]:
    """The memory service's environment, without the DSN (that comes from a Secret)."""
    spec = store.spec
    short = spec.tiers.short_term
    env = {
        "KAOS_MEMORY_HOST": ctx.listen_host,
        "KAOS_MEMORY_PORT": str(ctx.listen_port),
        "KAOS_MEMORY_STORAGE": spec.storage.type,
        "KAOS_MEMORY_DATA_DIR": ctx.data_dir,
        "KAOS_MEMORY_COLLECTION": spec.collection,
        "KAOS_MEMORY_MODEL_BASE_URL": openai_base_url(ctx.model_api_url),
        "KAOS_MEMORY_EMBEDDING_BASE_URL": openai_base_url(
            ctx.embedding_model_api_url or ctx.model_api_url
        ),
        "KAOS_MEMORY_SUMMARIZATION_MODEL": ctx.summarization_model,
        "KAOS_MEMORY_EMBEDDING_MODEL": ctx.embedding_model,
        "KAOS_MEMORY_EMBEDDING_DIMS": str(spec.models.embedding.dimensions),
        "KAOS_MEMORY_TOKEN_BUDGET": str(short.token_budget),
    }
    if short.fold_trigger_tokens is not None:
        env["KAOS_MEMORY_FOLD_TRIGGER"] = str(short.fold_trigger_tokens)
    if short.fold_target_tokens is not None:
        env["KAOS_MEMORY_FOLD_TARGET"] = str(short.fold_target_tokens)
    long_term = spec.tiers.long_term
    env["KAOS_MEMORY_LONG_TERM_ENABLED"] = bool_env(long_term.enabled)
    optional = {
        "KAOS_MEMORY_RECALL_THRESHOLD": long_term.score_threshold,
        "KAOS_MEMORY_EXTRACTION_PROMPT": long_term.extraction_prompt,
        "KAOS_MEMORY_EXTRACTION_SYSTEM_PROMPT": long_term.extraction_system_prompt,
        "KAOS_MEMORY_EXTRACTION_CONCURRENCY": long_term.extraction_concurrency,
        "KAOS_MEMORY_DIGEST_PROMPT": spec.tiers.medium_term.digest_prompt,
        "KAOS_MEMORY_DIGEST_MAX_TOKENS": spec.tiers.medium_term.digest_max_tokens,
        "KAOS_MEMORY_MAX_CONCURRENT_REQUESTS": spec.max_concurrent_requests,
        **retention_env(spec.retention, spec.quotas),
    }
    env.update({name: str(value) for name, value in optional.items() if value is not None})
    env.update(
        {
            "KAOS_MEMORY_MAX_EVENTS": str(short.max_events),
            "KAOS_MEMORY_IDLE_FLUSH_SECONDS": str(short.idle_flush_seconds),
            "KAOS_MEMORY_DIGEST_RETENTION": str(spec.tiers.medium_term.digest_retention),
            "KAOS_MEMORY_RECALL_TOP_K": str(spec.tiers.long_term.recall_top_k),
            "KAOS_MEMORY_INJECT_SOURCES": ",".join(spec.tiers.long_term.inject_sources),
            "KAOS_MEMORY_MAX_READ_SCOPE": spec.max_read_scope,
            "KAOS_MEMORY_DEFAULT_FAILURE_MODE": spec.default_failure_mode,
            # Posture: the operator's, authoritative for writes.
            "KAOS_MEMORY_REQUIRE_PRINCIPAL": bool_env(ctx.posture.require_principal),
            "KAOS_MEMORY_REQUIRE_AGENT_IDENTITY": bool_env(ctx.posture.require_agent_identity),
        }
    )
    env.update(telemetry_env(store, spec.telemetry, ctx.telemetry))
    return env


def _pvc(store: MemoryStore) -> Obj:
    storage = store.spec.storage
    return claim(store, pvc_name(store), storage.size, storage.storage_class_name)


def _spread(store: MemoryStore) -> Obj:
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": selector_labels(store)},
                    },
                }
            ]
        }
    }


def _receipt_key_volume(ref: SecretKeyRef) -> Obj:
    # Only the named key, readable by the pod's group (fsGroup) and nobody else.
    items = [{"key": ref.key, "path": RECEIPT_KEY_FILE}]
    return {
        "name": RECEIPT_KEY_VOLUME,
        "secret": {"secretName": ref.name, "items": items, "defaultMode": 0o440},
    }


# spec.encryption.kekSecret: every key of that Secret (the KEK's versions and current),
# mounted as a directory, so a rotated Secret reaches the running pod.
KEK_VOLUME = "kek"
KEK_ENV = "KAOS_MEMORY_ENCRYPTION_KEK_DIR"
KEK_DIR = "/var/run/kaos/memory-kek"


def encryption_env(store: MemoryStore) -> dict[str, str]:
    """Sealing on with the mounted KEK, off when disabled; unset without a KEK Secret."""
    encryption = store.spec.encryption
    if encryption is None or encryption.kek_secret is None:
        return {}
    if not encryption.enabled:
        return {"KAOS_MEMORY_ENCRYPTION": "off"}
    return {"KAOS_MEMORY_ENCRYPTION": "on", KEK_ENV: KEK_DIR}


def _kek_volume(secret: str) -> Obj:
    return {"name": KEK_VOLUME, "secret": {"secretName": secret, "defaultMode": 0o440}}


def memory_store_deployment(store: MemoryStore, ctx: MemoryStoreContext) -> Obj:
    spec = store.spec
    local = spec.storage.type == "local"
    secured = ctx.posture.security_enabled
    values = memory_store_env(store, ctx)
    if secured:
        # Pod paths and the in-cluster API server, so here and not in memory_store_env.
        values.update(security.memory_security_env(ctx.posture))
        values.update(security.memory_admin_env(store))
    kek = encryption_env(store)
    values.update(kek)
    encryption = spec.encryption
    kek_secret = encryption.kek_secret if encryption is not None and KEK_ENV in kek else None
    env = env_list(values)
    for role, variable in ROLE_KEY_ENV.items():
        key_ref = getattr(spec.models, role).api_key_secret
        if key_ref is not None:
            env.append(
                {
                    "name": variable,
                    "valueFrom": {"secretKeyRef": {"name": key_ref.name, "key": key_ref.key}},
                }
            )
    if not local and spec.storage.connection_secret is not None:
        ref = spec.storage.connection_secret
        env.append(
            {"name": DSN_ENV, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}
        )
    receipt_key = spec.receipts.key_secret if spec.receipts is not None else None
    if receipt_key is not None:
        env.append({"name": RECEIPT_KEY_ENV, "value": f"{RECEIPT_KEY_DIR}/{RECEIPT_KEY_FILE}"})
    volume: Obj = (
        {"name": "data", "persistentVolumeClaim": {"claimName": pvc_name(store)}}
        if local
        # External mode keeps only Mem0's node-local history here: not memory data.
        else {"name": "data", "emptyDir": {}}
    )
    main = container(
        "memory",
        spec.image or ctx.images.memory,
        ctx.images.pull_policy,
        port=MEMORY_PORT,
        command=["kaos-memory"],
        env=env,
        resources=spec.resources,
        readiness=http_probe("/readyz"),
        liveness=http_probe("/healthz"),
        lifecycle=pre_stop_sleep(),
        volume_mounts=[
            {"name": "data", "mountPath": ctx.data_dir},
            *([security.callers_mount()] if secured else []),
            *(
                [{"name": RECEIPT_KEY_VOLUME, "mountPath": RECEIPT_KEY_DIR, "readOnly": True}]
                if receipt_key is not None
                else []
            ),
            *(
                [{"name": KEK_VOLUME, "mountPath": KEK_DIR, "readOnly": True}]
                if kek_secret is not None
                else []
            ),
        ],
        security=restricted_security_context(),
    )
    replicas = spec.effective_replicas()
    # The pod keeps its namespace's default ServiceAccount and token: it needs them to
    # fetch the issuer's keys (jwks) or to send TokenReviews.
    dep = deployment(
        store,
        container=main,
        replicas=replicas,
        volumes=[
            volume,
            *([security.callers_volume(store.name)] if secured else []),
            *([_receipt_key_volume(receipt_key)] if receipt_key is not None else []),
            *([_kek_volume(kek_secret)] if kek_secret is not None else []),
        ],
        strategy="Recreate" if local else "RollingUpdate",
        pod_security={
            "runAsNonRoot": True,
            "fsGroup": NONROOT_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        affinity=None if local or replicas < 2 else _spread(store),
    )
    # Every KAOS_MEMORY_* variable is the operator's, set today or not.
    return with_overrides(dep, spec, reserved=reserved_prefixes("KAOS_MEMORY_", TELEMETRY_PREFIX))


def desired_memorystore_objects(store: MemoryStore, ctx: MemoryStoreContext) -> list[Obj]:
    """A PVC when local, Deployment and Service; a PDB when two or more replicas.

    The claim comes first: a pod created before its claim is reported unschedulable
    ("persistentvolumeclaim not found") until the claim appears."""
    objects = [_pvc(store)] if store.spec.storage.type == "local" else []
    objects += [memory_store_deployment(store, ctx), service(store, MEMORY_PORT)]
    if store.spec.effective_replicas() >= 2:
        objects.append(disruption_budget(store, {"minAvailable": 1}))
    if ctx.posture.security_enabled:
        objects += [
            security.callers_config_map(store, ctx.callers),
            egress.with_egress(
                # The operator reads the store's receipt key (status.receiptKey).
                egress.admitting(
                    security.network_policy(store, MEMORY_PORT, {"Agent": ctx.callers}),
                    MEMORY_PORT,
                    egress.operator_peer(ctx.posture),
                ),
                egress.memory_store_egress(store, ctx.posture),
            ),
        ]
    return objects
