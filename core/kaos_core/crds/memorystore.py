"""The MemoryStore resource: one central memory service that agents bind to."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from kaos_core.crds.agent import FailureMode, ReadScope
from kaos_core.crds.common import (
    AGE,
    ENDPOINT,
    PHASE,
    CommonStatus,
    CRDModel,
    CustomObject,
    KindInfo,
    PrinterColumn,
    SecretKeyRef,
    Telemetry,
    cel,
    defaulted,
    image_field,
    ref_name,
    resources_field,
    telemetry_field,
)
from kaos_core.crds.overrides import (
    ContainerOverride,
    PodOverride,
    container_field,
    pod_field,
)

StorageType = Literal["local", "external"]

# Prompt overrides travel as environment variables: kept well below their size limits.
PROMPT_MAX = 16 * 1024

# A Kubernetes resource quantity such as 1Gi or 500M.
QUANTITY = r"^[0-9]+(\.[0-9]+)?([EPTGMK]i?|[mk])?$"


class ConnectionSecretRef(CRDModel):
    """The Secret holding the PostgreSQL connection string (DSN)."""

    name: str = Field(
        min_length=1,
        max_length=253,
        description="The Secret, in the store's namespace (the operator never reads it; the "
        "pods get it through secretKeyRef).",
    )
    key: str = Field(
        default="dsn",
        min_length=1,
        max_length=253,
        description="Its key holding the DSN, e.g. postgresql://user:pass@host:5432/db.",
    )


class StoreStorage(CRDModel):
    """Where the store keeps every tier: one volume (local) or PostgreSQL (external)."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.type != 'external' || has(self.connectionSecret)",
                "external storage requires connectionSecret",
            ),
            (
                "self.type != 'local' || !has(self.connectionSecret)",
                "local storage takes no connectionSecret",
            ),
        )
    )

    type: StorageType = Field(
        default="local",
        description=(
            "local: SQLite + embedded Chroma on one volume; external: PostgreSQL + pgvector."
        ),
    )
    size: str = Field(
        default="1Gi",
        max_length=32,
        pattern=QUANTITY,
        description="local: size of the PersistentVolumeClaim holding the store, e.g. 1Gi.",
    )
    storage_class_name: str | None = Field(
        default=None,
        max_length=253,
        description="local: StorageClass of the claim; unset takes the cluster's default "
        "class. Without a default class (or a matching PersistentVolume) the claim stays "
        "Pending and the store never becomes Ready (reason ClaimPending).",
    )
    connection_secret: ConnectionSecretRef | None = Field(
        default=None,
        description="external (required): the Secret key holding the PostgreSQL connection "
        "string (DSN); the database needs the pgvector extension.",
    )


class ModelRole(CRDModel):
    """A model of a ModelAPI in this namespace; each role may name its own ModelAPI."""

    model_api: str = ref_name("ModelAPI serving the model.", alias="modelAPI")
    model: str | None = Field(
        default=None, max_length=253, description="Model name; defaults to the ModelAPI's first."
    )
    api_key_secret: SecretKeyRef | None = Field(
        default=None,
        description="Secret key holding the bearer key the memory service sends to this"
        " role's ModelAPI (none by default).",
    )


class EmbeddingRole(ModelRole):
    """The embedding model: a ModelAPI model and the size of its vectors."""

    dimensions: int = Field(default=1536, ge=8, le=16384, description="Vector size.")


class StoreModels(CRDModel):
    """The two model roles: summarization (extraction, digests) and embedding (the index).

    Each role names its own ModelAPI (e.g. local embeddings, a hosted LLM); the memory
    service gets one base URL and key per role.
    """

    summarization: ModelRole = Field(
        description="The model that writes digests and extracts facts (a chat model)."
    )
    embedding: EmbeddingRole = Field(
        description="The embedding model of the long-term index (unused while"
        " tiers.longTerm.enabled is false)."
    )


class ShortTermTier(CRDModel):
    """The verbatim window, bounded by tokens; folding into the digest keeps it small."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.foldTriggerTokens) || self.foldTriggerTokens <= self.tokenBudget",
                "foldTriggerTokens must not exceed tokenBudget",
            ),
            (
                "!has(self.foldTargetTokens) || self.foldTargetTokens <"
                " (has(self.foldTriggerTokens) ? self.foldTriggerTokens : self.tokenBudget)",
                "foldTargetTokens must be below the fold trigger"
                " (foldTriggerTokens, else tokenBudget)",
            ),
            (
                "has(self.foldTargetTokens) || !has(self.foldTriggerTokens)"
                " || self.tokenBudget / 2 < self.foldTriggerTokens",
                "foldTriggerTokens must exceed the default fold target (tokenBudget / 2);"
                " set foldTargetTokens",
            ),
        )
    )

    token_budget: int = Field(
        default=4096, ge=16, le=10_000_000, description="Window budget in tokens."
    )
    fold_trigger_tokens: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Window size that starts a fold (compaction); defaults to tokenBudget.",
    )
    fold_target_tokens: int | None = Field(
        default=None,
        ge=1,
        le=10_000_000,
        description="Window size a fold leaves; defaults to tokenBudget / 2.",
    )
    max_events: int = Field(default=2000, ge=2, le=1_000_000, description="Hard event cap.")
    idle_flush_seconds: int = Field(
        default=900,
        ge=0,
        le=30 * 86400,
        description=(
            "After this many seconds without a write, a session's remaining window is folded"
            " into its digest and extracted to long-term memory; 0 turns the idle flush off."
        ),
    )


class MediumTermTier(CRDModel):
    """The rolling per-session digest."""

    digest_retention: int = Field(
        default=20, ge=1, le=10_000, description="Digest versions kept per session."
    )
    digest_prompt: str | None = Field(
        default=None,
        min_length=1,
        max_length=PROMPT_MAX,
        description="System prompt of the digest (summarisation) call; defaults to KAOS's.",
    )


class LongTermTier(CRDModel):
    """The semantic store (Mem0)."""

    enabled: bool = Field(
        default=True,
        description="false: a window-and-digest store with no vector index (no collection is"
        " created, nothing is extracted, long-term recall answers no facts).",
    )
    recall_top_k: int = Field(default=10, ge=1, le=100, description="Facts recalled per read.")
    score_threshold: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="Minimum semantic score of a recalled fact; defaults to the service's 0.1.",
    )
    extraction_prompt: str | None = Field(
        default=None,
        min_length=1,
        max_length=PROMPT_MAX,
        description="Instructions added to Mem0's fact-extraction prompt (its custom"
        " instructions), e.g. what to keep or never keep.",
    )
    extraction_concurrency: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="Extractions (Mem0 calls) running at once across sessions; defaults to 2.",
    )


class StoreTiers(CRDModel):
    """The three tiers: verbatim window, per-session digest, long-term facts."""

    short_term: ShortTermTier = defaulted(ShortTermTier)
    medium_term: MediumTermTier = defaulted(MediumTermTier)
    long_term: LongTermTier = defaulted(LongTermTier)


class MemoryStoreSpec(CRDModel):
    """Desired state of a MemoryStore."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.replicas) || self.replicas == 1"
                " || (has(self.storage) && self.storage.type == 'external')",
                "a local MemoryStore has exactly one replica",
            ),
        )
    )

    storage: StoreStorage = defaulted(StoreStorage)
    replicas: int | None = Field(
        default=None, ge=1, le=20, description="Defaults to 1 (local) or 2 (external)."
    )
    collection: str = Field(
        default="kaos_memory",
        max_length=63,
        pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_]{1,61}[a-zA-Z0-9]$",
        description="Vector collection, and so the store group.",
    )
    models: StoreModels
    tiers: StoreTiers = defaulted(StoreTiers)
    max_read_scope: ReadScope = Field(
        default="agent",
        description="Widest long-term scope an agent may read: session (the conversation's "
        "facts), agent (the agent's facts) or user (the user's facts through every agent). "
        "An Agent asking for more is refused (ReadScopeAboveCeiling).",
    )
    default_failure_mode: FailureMode = Field(
        default="soft",
        description="What a failed write or forget answers when the request does not say: "
        "soft: success marked degraded (the agent carries on); strict: an error (a strict "
        "Agent's turn fails). Reads are always soft.",
    )
    max_concurrent_requests: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="Memory requests (/v1/*) one replica serves at once; one more is answered"
        " 429 with Retry-After and changes nothing. Unlimited when unset.",
    )
    image: str | None = image_field("the chart's kaos-memory image")
    resources: dict[str, Any] | None = resources_field()
    telemetry: Telemetry | None = telemetry_field()
    container: ContainerOverride | None = container_field()
    pod: PodOverride | None = pod_field()

    def effective_replicas(self) -> int:
        if self.replicas is not None:
            return self.replicas
        return 2 if self.storage.type == "external" else 1


class MemoryStoreStatus(CommonStatus):
    """Observed state of a MemoryStore."""

    replicas: int | None = Field(default=None, description="Pods the Deployment asks for.")
    ready_replicas: int | None = Field(
        default=None, description="Pods ready to serve (passing their readiness probe)."
    )


class MemoryStore(CustomObject):
    kind: str = "MemoryStore"
    spec: MemoryStoreSpec
    status: MemoryStoreStatus = Field(default_factory=MemoryStoreStatus)

    info: ClassVar[KindInfo] = KindInfo(
        kind="MemoryStore",
        plural="memorystores",
        singular="memorystore",
        short_names=("mstore",),
        description="A central memory service (short-term, digest, long-term) agents bind to.",
        spec=MemoryStoreSpec,
        status=MemoryStoreStatus,
        printer_columns=(
            PrinterColumn("Storage", ".spec.storage.type"),
            PrinterColumn("Replicas", ".status.replicas", "integer"),
            PHASE,
            ENDPOINT,
            AGE,
        ),
    )
