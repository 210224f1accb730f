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
from kaos_core.crds.egress import EgressRule, egress_field
from kaos_core.crds.overrides import (
    ContainerOverride,
    PodOverride,
    container_field,
    pod_field,
)
from kaos_core.crds.storage import QUANTITY, ConnectionSecretRef
from kaos_core.extraction import ExtractionSystemPrompt
from kaos_core.trust import DEFAULT_INJECT_SOURCES, FactSource

StorageType = Literal["local", "external"]

# Prompt overrides travel as environment variables: kept well below their size limits.
PROMPT_MAX = 16 * 1024


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
    digest_max_tokens: int | None = Field(
        default=None,
        ge=16,
        le=1_000_000,
        description="Longest digest answer asked of the model and kept, in tokens; a longer"
        " one is unusable and the previous version stays. Defaults to twice the window's"
        " token budget, at least 1024. A small model that rambles runs to this bound on"
        " every digest while its other calls queue behind it: 1024 suits one.",
    )


class LongTermTier(CRDModel):
    """The semantic store (Mem0)."""

    enabled: bool = Field(
        default=True,
        description="false: a window-and-digest store with no vector index (no collection is"
        " created, nothing is extracted, long-term recall answers no facts).",
    )
    recall_top_k: int = Field(default=10, ge=1, le=100, description="Facts recalled per read.")
    inject_sources: list[FactSource] = Field(
        default_factory=lambda: list(DEFAULT_INJECT_SOURCES),
        min_length=1,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description="Sources of the facts an agent puts into a run by itself: user (stated"
        " by the user), saved (saved on purpose by the agent), assistant (inferred from the"
        " assistant's text), tool (taken from a tool's output). The rest stay reachable"
        " through search_memory, which shows each fact's provenance.",
    )
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
    extraction_system_prompt: ExtractionSystemPrompt | None = Field(
        default=None,
        description="The system prompt of the fact extraction: mem0 (the default), Mem0's"
        " own of about 8,400 tokens, mostly examples; or compact, the same instructions and"
        " output format in about 500 tokens, for a summarization model with a small context"
        " (a 4,096-token one, Ollama's default, cuts Mem0's from its head) or to spend fewer"
        " prompt tokens on every fold.",
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


# The longest retention age: a century, in days.
RETENTION_DAYS_MAX = 36_500


class StoreRetention(CRDModel):
    """How long memory is kept: records past their age are erased by the service's sweep
    (audited with the actor retention, counted in kaos_memory_records_expired_total),
    never hidden. Digest versions kept per session: tiers.mediumTerm.digestRetention."""

    fact_max_age_days: int | None = Field(
        default=None,
        ge=1,
        le=RETENTION_DAYS_MAX,
        description="A long-term fact older than this many days is erased (its vector and"
        " row). Kept until forgotten when unset.",
    )
    idle_session_days: int | None = Field(
        default=None,
        ge=1,
        le=RETENTION_DAYS_MAX,
        description="A session nobody wrote to for this many days is erased whole, as a"
        " session-level forget erases it: its window, digest versions and facts. Kept until"
        " forgotten when unset.",
    )


class PrincipalQuota(CRDModel):
    """What one principal (end user) may store; a write past it is refused 403
    quota_exceeded and writes nothing."""

    facts: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000_000,
        description="Long-term facts; at or above it the principal's writes are refused.",
    )
    turns: int | None = Field(
        default=None, ge=1, le=1_000_000_000, description="Stored turns, across sessions."
    )
    bytes: int | None = Field(
        default=None,
        ge=1,
        le=2**50,
        description="Bytes of stored turns (their content as stored), across sessions.",
    )


class AgentQuota(CRDModel):
    """How fast one agent may write; one write more is refused 429 with Retry-After."""

    writes_per_minute: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Writes per calendar minute, counted across every replica.",
    )


class StoreQuotas(CRDModel):
    """Per principal storage and per agent write rate; unlimited where unset."""

    principal: PrincipalQuota | None = Field(
        default=None, description="Limits of each principal's stored memory."
    )
    agent: AgentQuota | None = Field(default=None, description="Limits of each agent's writes.")


class StoreReceipts(CRDModel):
    """The key every forget's receipt is signed with (kaos memory verify-receipt checks it)."""

    key_secret: SecretKeyRef | None = Field(
        default=None,
        description="A Secret key holding an Ed25519 private key (PKCS#8 PEM: openssl genpkey"
        " -algorithm ed25519) every replica signs with. Unset: the store generates one on"
        " first start and keeps it in its conversation store.",
    )


class StoreEncryption(CRDModel):
    """Encryption at rest: every text stored for a principal (window turns, digest versions,
    fact text, Mem0's message context) sealed with AES-256-GCM under that principal's data
    key (the agent's where there is none), the keys wrapped by a key-encryption key (KEK)
    that never touches the database. A user-level forget destroys the principal's key."""

    kek_secret: str | None = Field(
        default=None,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="A Secret of this namespace holding the KEK: one key per version (v1,"
        " v2, ...: 32 random bytes, base64) and current (the version new data keys are"
        " wrapped with), mounted into the memory pod. Rotate by adding a version and"
        " pointing current at it: keys wrapped by older versions still unwrap, nothing is"
        " re-encrypted, no restart is needed. Set: sealing is on.",
    )
    enabled: bool = Field(
        default=True,
        description="false stores text in the clear even with a KEK (texts sealed before"
        " then read as erased).",
    )


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
    retention: StoreRetention | None = Field(
        default=None, description="Ages past which memory is erased; kept when unset."
    )
    quotas: StoreQuotas | None = Field(
        default=None, description="Per principal and per agent limits; unlimited when unset."
    )
    receipts: StoreReceipts | None = Field(
        default=None,
        description="How erasure receipts are signed; a key the store generates when unset.",
    )
    encryption: StoreEncryption | None = Field(
        default=None,
        description="Per-principal encryption at rest and crypto-shredding; text in the"
        " clear when unset.",
    )
    image: str | None = image_field("the chart's kaos-memory image")
    resources: dict[str, Any] | None = resources_field()
    telemetry: Telemetry | None = telemetry_field()
    container: ContainerOverride | None = container_field()
    pod: PodOverride | None = pod_field()
    egress: list[EgressRule] = egress_field(
        "storage external: its database; its ModelAPIs are allowed by the operator"
    )

    def effective_replicas(self) -> int:
        if self.replicas is not None:
            return self.replicas
        return 2 if self.storage.type == "external" else 1


class ReceiptKey(CRDModel):
    """The store's erasure receipt key as a JWK (RFC 8037): what kaos memory verify-receipt
    checks a receipt with when given no --key."""

    kty: Literal["OKP"] = Field(description="Key type: OKP.")
    crv: Literal["Ed25519"] = Field(description="Curve: Ed25519.")
    x: str = Field(max_length=64, description="The public key, base64url.")
    kid: str = Field(max_length=64, description="Its RFC 7638 thumbprint, as receipts name it.")


class MemoryStoreStatus(CommonStatus):
    """Observed state of a MemoryStore."""

    replicas: int | None = Field(default=None, description="Pods the Deployment asks for.")
    ready_replicas: int | None = Field(
        default=None, description="Pods ready to serve (passing their readiness probe)."
    )
    receipt_key: ReceiptKey | None = Field(
        default=None,
        description="The public key the store signs erasure receipts with, read from its"
        " /.well-known/kaos-memory-receipt-key once the Deployment is available.",
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
