"""Settings of the memory service, read once from ``KAOS_MEMORY_*`` variables at start.

Every knob of the tiers, the posture, the background executor and the model bindings
lives here and is validated before anything starts: contradictory values (a fold target
above its trigger, external storage without a DSN) stop the process with one line naming
the variables. Every field has a concern (its ``group``) and a description; the tables in
``images/memory/SETTINGS.md`` and the README are generated from them (``hack/gen-docs``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from kaos_core.auth import names
from kaos_core.auth.config import (
    DEFAULT_LEEWAY,
    REVIEW_CACHE_SECONDS,
    AuthMode,
    CallerAuthSettings,
    UserAuthSettings,
)
from kaos_core.memory.contract import FailureMode
from kaos_core.settings import EnvSettings, SettingsError
from pydantic import Field, model_validator

ReadCeiling = Literal["session", "agent", "user"]

DEFAULT_COLLECTION = "kaos_memory"
# Chroma's collection rule (3-63 chars, alphanumerics plus ._-, alphanumeric at both ends)
# is the stricter of the two backends; pgvector uses the name as a table name.
_COLLECTION_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_]{1,61}[a-zA-Z0-9]$")
# The seed names the collection variable per storage mode; both are accepted.
_MODE_COLLECTION_ENV = {
    "local": "KAOS_MEMORY_LOCAL_COLLECTION",
    "external": "KAOS_MEMORY_EXTERNAL_COLLECTION",
}

# Variables renamed since a release: the earlier name is read when the new one is unset.
_EARLIER_NAMES = {"KAOS_MEMORY_VECTOR_CACHE_MB": "KAOS_MEMORY_PG_VECTOR_CACHE_MB"}

# The concerns, in the order the settings tables list them.
GROUPS: dict[str, str] = {
    "http": "Listening",
    "storage": "Storage",
    "models": "Models",
    "tiers": "Tiers",
    "posture": "Scope and posture",
    "executor": "Background work and shutdown",
    "consolidation": "Consolidation across replicas",
    "auth": "Verified agent identity",
    "user": "Verified user identity",
    "admin": "Admin access (Kubernetes RBAC)",
}


def setting(group: str, description: str, **kwargs: Any) -> Any:
    """A field in one of ``GROUPS``, documented (the settings tables are generated)."""
    assert group in GROUPS, group
    extra: dict[str, Any] = {"group": group}
    if "default_doc" in kwargs:
        extra["default_doc"] = kwargs.pop("default_doc")
    return Field(description=description, json_schema_extra=extra, **kwargs)


@dataclass(frozen=True)
class AdminSettings:
    """Admin access (``kaos_memory.admin``): the store RBAC decides on, and the API server
    (the auth settings' own) that reviews credentials."""

    store_namespace: str | None
    store_name: str | None
    api_server: str | None
    ca_file: Path | None
    token_file: Path | None
    cache_seconds: float = REVIEW_CACHE_SECONDS


@dataclass(frozen=True)
class HttpSettings:
    host: str
    port: int
    log_level: str
    max_body_bytes: int
    # Memory requests served at once (0: unlimited); one more is 429 with Retry-After.
    max_concurrent_requests: int = 0


@dataclass(frozen=True)
class StorageSettings:
    """Where the tiers live; ``group`` is the store group every key and fact carries."""

    mode: Literal["local", "external"]
    data_dir: Path
    dsn: str | None
    collection: str
    pg_pool_size: int
    pg_partitions: int
    vector_cache_mb: int

    @property
    def group(self) -> str:
        return self.collection

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "conversation.sqlite3"


@dataclass(frozen=True)
class ModelSettings:
    """Each role's endpoint, key and model: summarisation (digest and extraction) and
    embedding (the index) may be served by different ModelAPIs."""

    summarization_base_url: str
    summarization_api_key: str | None
    summarization_model: str
    embedding_base_url: str
    embedding_api_key: str | None
    embedding_model: str
    embedding_dims: int
    timeout: float
    embed_timeout: float
    # Further calls when an answer is unusable (``summarizer``, ``storage.mem0llm``).
    answer_retries: int = 2
    # The digest call's system prompt and the instructions added to Mem0's extraction
    # prompt; ``None`` keeps the built-in ones.
    digest_prompt: str | None = None
    extraction_prompt: str | None = None


@dataclass(frozen=True)
class TierSettings:
    """The window, the fold it triggers, digest retention, and recall."""

    token_budget: int
    max_events: int
    fold_trigger: int
    fold_target: int
    digest_retention: int
    digest_max_tokens: int
    recall_top_k: int
    recall_timeout: float
    recall_threshold: float


@dataclass(frozen=True)
class PostureSettings:
    max_read_scope: ReadCeiling
    require_principal: bool
    require_agent_identity: bool
    default_failure_mode: FailureMode


@dataclass(frozen=True)
class ExecutorSettings:
    workers: int
    queue_size: int
    retries: int
    backoff: float
    backoff_max: float
    drain_timeout: float


@dataclass(frozen=True)
class ConsolidationSettings:
    lease_ttl: float
    sweep_interval: float
    idle_flush_seconds: float
    extraction_max_attempts: int
    extraction_concurrency: int = 2


class MemorySettings(EnvSettings):
    """The memory service's settings; one field per ``KAOS_MEMORY_<FIELD>`` variable.

    Components are handed one concern each: ``.http``, ``.backend`` (the ``storage``
    group; ``storage`` itself is the mode's variable), ``.models``, ``.tiers``,
    ``.posture``, ``.executor``, ``.consolidation``, ``.auth``.
    """

    env_prefix: ClassVar[str] = "KAOS_MEMORY_"

    host: str = setting("http", "listen address", default="0.0.0.0")
    port: int = setting("http", "listen port", default=8080, ge=1, le=65535)
    log_level: str = setting("http", "log level of the JSON logs on stderr", default="INFO")
    max_body_bytes: int = setting(
        "http", "request body limit (413 above it)", default=1024 * 1024, ge=1024
    )
    max_concurrent_requests: int = setting(
        "http",
        "memory requests (`/v1/*`) served at once; one more is answered 429"
        " `too_many_requests` with `Retry-After: 1` before its body is read, and changes"
        " nothing (health, readiness and metrics are never limited); `0`: unlimited",
        default=0,
        ge=0,
        le=100_000,
    )

    storage: Literal["local", "external"] = setting(
        "storage",
        "`local`: SQLite + embedded Chroma in the data dir (one replica); `external`:"
        " PostgreSQL + pgvector (stateless, several replicas)",
        default="local",
    )
    data_dir: Path = setting(
        "storage",
        "local mode: the one volume with `conversation.sqlite3`, `chroma/`, `mem0/` (Mem0's"
        " history DB) and the single-writer lock `kaos-memory.lock`. Both modes: Mem0's config"
        " dir (`MEM0_DIR`) is `mem0/` here, so it must be writable (an `emptyDir` is enough in"
        " external mode, which keeps no Mem0 history)",
        default=Path("/data/memory"),
    )
    dsn: str | None = setting(
        "storage",
        "external mode (required there): PostgreSQL connection string; the conversational"
        " tables (`kaos_mem_*`) and Mem0's pgvector table share this database. HNSW iterative"
        " scans are switched on for it unless the DSN sets `options` itself",
        default=None,
    )
    collection: str = setting(
        "storage",
        "vector collection (Chroma collection / pgvector table) and the store group recorded"
        " on every fact and conversation key. Also accepted as `KAOS_MEMORY_LOCAL_COLLECTION`"
        " (local mode) or `KAOS_MEMORY_EXTERNAL_COLLECTION` (external mode) when"
        " `KAOS_MEMORY_COLLECTION` is unset. 3-63 letters, digits or `_`",
        default=DEFAULT_COLLECTION,
    )
    mem0_threads: int = setting(
        "storage",
        "threads running Mem0's blocking calls (the event loop never runs them); local mode"
        " gives recall's Chroma searches as many threads of their own, so extractions"
        " waiting on a slow model never queue a recall",
        default=4,
        ge=1,
        le=64,
    )
    pg_pool_size: int = setting(
        "storage",
        "external mode: connections (and threads) of the conversational store, and the"
        " connections of recall's vector searches and of its session reads (a pool each, on"
        " the event loop)",
        default=8,
        ge=1,
        le=256,
    )
    vector_cache_mb: int = setting(
        "storage",
        "memory (MiB) for principals' facts searched in the service instead of the vector"
        " store, exactly. Local mode: every principal's vectors and payloads, current with"
        " every write this process makes. External mode: the vectors of principals with at"
        " least 1,000 facts, checked against the database's version of the principal on"
        " every search. A principal is held only if it fits once those not searched for 5"
        " minutes are dropped, else the store serves it; 0 holds none. Read from"
        " KAOS_MEMORY_PG_VECTOR_CACHE_MB, its earlier name, when unset",
        default=256,
        ge=0,
        le=65536,
    )
    pg_partitions: int = setting(
        "storage",
        "external mode: hash partitions by principal of a new long-term table (a principal's"
        " search, listing and erasure read one partition); 0 keeps Mem0's single table. Read"
        " only when the table is created: an existing table keeps its layout",
        default=64,
        ge=0,
        le=1024,
    )

    model_base_url: str = setting(
        "models",
        "OpenAI-compatible base URL (ending in `/v1`) of both model roles unless a role has"
        " its own",
        default="http://127.0.0.1:8000/v1",
    )
    summarization_base_url: str | None = setting(
        "models",
        "OpenAI-compatible base URL (ending in `/v1`) of the summarisation model (digest and"
        " Mem0 extraction) when it is served apart (e.g. a hosted LLM)",
        default=None,
        default_doc="= `MODEL_BASE_URL`",
    )
    embedding_base_url: str | None = setting(
        "models",
        "OpenAI-compatible base URL (ending in `/v1`) of the embedding model when it is served"
        " apart (e.g. a local embedding server)",
        default=None,
        default_doc="= `MODEL_BASE_URL`",
    )
    api_key: str | None = setting(
        "models", "bearer key for the model endpoint of both roles (optional)", default=None
    )
    summarization_api_key: str | None = setting(
        "models",
        "bearer key for the summarisation endpoint",
        default=None,
        default_doc="= `API_KEY`",
    )
    embedding_api_key: str | None = setting(
        "models", "bearer key for the embedding endpoint", default=None, default_doc="= `API_KEY`"
    )
    summarization_model: str = setting(
        "models", "model for Mem0 extraction and the session digest", default="summarizer"
    )
    embedding_model: str = setting("models", "model for the vector index", default="embedder")
    embedding_dims: int = setting(
        "models",
        "embedding size (must match the model and, in external mode, an existing pgvector table)",
        default=1536,
        ge=1,
        le=16000,
    )
    model_timeout: float = setting(
        "models",
        "seconds one summarisation/extraction call may take (background only)",
        default=60.0,
        gt=0,
    )
    embed_timeout: float = setting(
        "models", "seconds one embedding call may take", default=10.0, gt=0
    )
    answer_retries: int = setting(
        "models",
        "further calls to the summarisation model when its answer is unusable (an extraction"
        " answer Mem0 cannot read as its JSON; a digest that is empty, cut off at the model's"
        " token limit or longer than `DIGEST_MAX_TOKENS`). Then an extraction is recorded as"
        " `unusable` and its turns stay in the digest; a digest keeps the previous version"
        " and its turns wait in the outbox, retried with back-off",
        default=2,
        ge=0,
        le=10,
    )
    digest_prompt: str | None = setting(
        "models",
        "system prompt of the digest call (the built-in one asks for a concise narrative of"
        " the conversation so far)",
        default=None,
        default_doc="built in",
        min_length=1,
    )
    extraction_prompt: str | None = setting(
        "models",
        "instructions added to Mem0's fact-extraction prompt (its custom instructions), e.g."
        " what to keep or never keep",
        default=None,
        min_length=1,
    )

    token_budget: int = setting(
        "tiers",
        "short-term window budget in tokens (approximation: `ceil(chars/4) + 4` per turn);"
        " the window is the newest turns that fit, computed on read",
        default=4096,
        ge=16,
    )
    max_events: int = setting(
        "tiers",
        "hard cap on turns in the window; more unfolded turns than this also trigger a fold",
        default=2000,
        ge=2,
    )
    fold_trigger: int | None = setting(
        "tiers",
        "a write that leaves more unfolded tokens than this schedules a fold",
        default=None,
        ge=1,
        default_doc="= budget",
    )
    fold_target: int | None = setting(
        "tiers",
        "a fold evicts the oldest turns until at most this many tokens stay unfolded. Must"
        " hold: `0 < FOLD_TARGET < FOLD_TRIGGER <= TOKEN_BUDGET`",
        default=None,
        ge=1,
        default_doc="budget / 2",
    )
    digest_retention: int = setting(
        "tiers",
        "digest versions kept per session; older versions are pruned",
        default=20,
        ge=1,
    )
    digest_max_tokens: int | None = setting(
        "tiers",
        "longest digest answer kept, in the window's token count; a longer one is unusable"
        " (a model that rambles or repeats itself) and the previous version stays. The"
        " digest is recalled beside the window: twice the window's budget (or 1024 for a small"
        " window) is far more than a concise narrative needs",
        default=None,
        ge=16,
        default_doc="budget * 2, at least 1024",
    )
    recall_top_k: int = setting(
        "tiers",
        "long-term facts per recall when the request gives no `top_k`",
        default=10,
        ge=1,
        le=100,
    )
    recall_timeout: float = setting(
        "tiers",
        "seconds the long-term search of a recall may take before the answer is `degraded`;"
        " also bounds the vector-store check of a strict write",
        default=5.0,
        gt=0,
    )
    long_term_enabled: bool = setting(
        "tiers",
        "`false`: a window-and-digest store with no vector index: no Chroma or pgvector"
        " collection is created and Mem0 is not loaded, folds write digests but extract"
        " nothing, the long-term tier of a recall or list answers no facts (not degraded),"
        " and a forget erases the conversational tiers",
        default=True,
    )
    recall_threshold: float = setting(
        "tiers",
        "minimum semantic score of a recalled fact (Mem0's default; cosine on pgvector,"
        " `1/(1+d²)` on Chroma)",
        default=0.1,
        ge=0,
        le=1,
    )

    max_read_scope: ReadCeiling = setting(
        "posture",
        "store ceiling for agents' reads and forgets: `session` < `agent` < `user`; a level"
        " above it is 403 (admin calls, without `X-Agent-Identity`, are not bound by it, and"
        " `store` is administrative and outside the order: only for admin calls)",
        default="agent",
    )
    require_principal: bool = setting(
        "posture",
        "a write without `X-Principal` is 403; an agent's read/forget at"
        " `session`/`agent`/`user` level without `X-Principal` is 403 too (the two-key"
        " partition cannot be kept without it); admin calls are exempt",
        default=False,
    )
    require_agent_identity: bool = setting(
        "posture", "a write without `X-Agent-Identity` is 403", default=False
    )
    default_failure_mode: FailureMode = setting(
        "posture",
        "failure mode of write and forget when the request gives none: `soft` answers 2xx"
        " with `degraded: true`; `strict` answers 500 (a strict write also fails, writing"
        " nothing, when the vector store does not answer or background work cannot be"
        " queued). Recall and list are always soft",
        default="soft",
    )

    executor_workers: int = setting(
        "executor",
        "concurrent background jobs (folds with their digest and extraction)",
        default=2,
        ge=1,
        le=64,
    )
    executor_queue_size: int = setting(
        "executor",
        "queued jobs; when full a write still succeeds, answers `degraded: true`, and the"
        " fold waits in the outbox for the next sweep",
        default=256,
        ge=1,
    )
    executor_retries: int = setting(
        "executor",
        "retries of a failed digest or extraction step",
        default=3,
        ge=0,
        le=20,
    )
    executor_backoff: float = setting(
        "executor", "first retry delay in seconds, doubled per retry", default=0.5, ge=0
    )
    executor_backoff_max: float = setting("executor", "cap of the retry delay", default=10.0, ge=0)
    drain_timeout: float = setting(
        "executor",
        "seconds SIGTERM waits for queued and running background jobs before exit (keep"
        " below the pod's termination grace period)",
        default=25.0,
        ge=0,
    )

    lease_ttl: float = setting(
        "consolidation",
        "seconds a replica's lease on a session's digest or extraction work lasts without"
        " renewal (the holder renews it every third of that); a replica that dies leaves its"
        " sessions to others after this",
        default=60.0,
        ge=1.0,
    )
    sweep_interval: float = setting(
        "consolidation",
        "seconds between one replica's sweeps of the outbox (fold work nobody holds: left by"
        " a dead replica, or backing off after failures) and of idle sessions (±20% jitter)",
        default=10.0,
        gt=0,
    )
    idle_flush_seconds: float = setting(
        "consolidation",
        "a session nobody wrote to for this long has its remaining window folded into the"
        " digest and extracted to long-term memory, so short conversations reach it too;"
        " `0` turns the idle flush off",
        default=900.0,
        ge=0,
    )
    extraction_max_attempts: int = setting(
        "consolidation",
        "attempts at one evicted batch's extraction before it is recorded as `failed`"
        " (between jobs a failing batch backs off, doubling from the sweep interval up to 15"
        " minutes, so this is hours of continuous failure)",
        default=200,
        ge=1,
        le=100_000,
    )
    extraction_concurrency: int = setting(
        "consolidation",
        "extractions (Mem0 calls) one replica runs at once across sessions (one session's"
        " extractions always run one at a time, in order)",
        default=2,
        ge=1,
        le=64,
    )

    auth_mode: AuthMode = setting(
        "auth",
        "`off`: identity headers are trusted as sent; `jwks`: every `/v1/*` request needs an"
        " `X-Agent-Token` (the agent's projected service-account token, audience"
        " `kaos.dev/memory`) verified offline against the service-account issuer's keys;"
        " `tokenreview`: the same, verified by the API server (TokenReview; sees revoked"
        " tokens, costs a round trip per token and `KAOS_MEMORY_AUTH_REVIEW_CACHE_SECONDS`)",
        default="off",
    )
    auth_issuer: str | None = setting(
        "auth",
        "`jwks` (required there): the cluster's service-account issuer (`iss` of its tokens,"
        " e.g. `https://kubernetes.default.svc.cluster.local`). Its keys come from"
        " `KAOS_MEMORY_AUTH_JWKS_URL`, else `<API server>/openid/v1/jwks` when"
        " `KAOS_MEMORY_AUTH_API_SERVER` is set, else `<issuer>/.well-known/openid-configuration`",
        default=None,
    )
    auth_jwks_url: str | None = setting(
        "auth",
        "`jwks`: where to fetch the issuer's keys instead of discovery (e.g."
        " `https://kubernetes.default.svc/openid/v1/jwks`). Keys are fetched on first use and"
        " again for an unknown key id at most every 30 s",
        default=None,
    )
    auth_api_server: str | None = setting(
        "auth",
        "the API server URL (e.g. `https://kubernetes.default.svc`). `tokenreview` (required"
        " there) posts TokenReviews to it (the service's ServiceAccount needs `create` on"
        " tokenreviews: the chart's `<release>-tokenreview` binding); `jwks` fetches the"
        " issuer's keys from it",
        default=None,
    )
    auth_ca_file: Path | None = setting(
        "auth",
        "CA bundle for the issuer, the JWKS URL and the API server (in a pod:"
        " `/var/run/secrets/kubernetes.io/serviceaccount/ca.crt`)",
        default=None,
        default_doc="system CAs",
    )
    auth_token_file: Path | None = setting(
        "auth",
        "the service's own token, sent as bearer to the issuer and the API server (re-read"
        " when it changes; in a pod: `/var/run/secrets/kubernetes.io/serviceaccount/token`)",
        default=None,
    )
    auth_leeway: float = setting(
        "auth",
        "seconds of clock skew tolerated on a token's `exp`, `nbf` and `iat` (`jwks`)",
        default=DEFAULT_LEEWAY,
        ge=0,
        le=300,
    )
    auth_review_cache_seconds: float = setting(
        "auth",
        "`tokenreview`: seconds an accepted token's verdict is reused (never past its `exp`)",
        default=REVIEW_CACHE_SECONDS,
        ge=0,
        le=300,
    )
    callers_file: Path = setting(
        "auth",
        "the callers file the operator writes (the agents bound to this store: identity,"
        " namespace, ServiceAccount), re-read when it changes; a verified token of a"
        " ServiceAccount not listed is 403, and a missing or invalid file allows nobody",
        default=Path(names.CALLERS_PATH),
    )
    store_namespace: str | None = setting(
        "admin",
        "the namespace of this service's MemoryStore (set by the operator). With"
        " `KAOS_MEMORY_AUTH_MODE` on, a call without `X-Agent-Token` but with"
        " `Authorization: Bearer <Kubernetes credential>` is an admin call: the API server"
        " (`KAOS_MEMORY_AUTH_API_SERVER`) reviews the credential (TokenReview) and whether"
        " its user may `get` (recall, list, audit) or `delete` (forget)"
        " `memorystores/data` (group `kaos.tools`) of this store (SubjectAccessReview; the"
        " ServiceAccount needs `create` on both: the chart's `<release>-memory-review`);"
        " unset, admin calls are 403 `admin_not_configured`",
        default=None,
        min_length=1,
        max_length=63,
    )
    store_name: str | None = setting(
        "admin",
        "the name of this service's MemoryStore (set by the operator), for the same review",
        default=None,
        min_length=1,
        max_length=253,
    )
    admin_review_cache_seconds: float = setting(
        "admin",
        "seconds an admin credential's TokenReview and SubjectAccessReview answers are"
        " reused (never past the credential's `exp`): a revoked binding takes effect within"
        " this time",
        default=REVIEW_CACHE_SECONDS,
        ge=0,
        le=300,
    )

    user_issuer: str | None = setting(
        "user",
        "the OIDC issuer of end users' tokens (`iss`, an https URL; needs"
        " `KAOS_MEMORY_AUTH_MODE`). Set, the principal of an agent's call is the principal"
        " claim of the user token the agent forwards in `X-User-Token`, verified here too"
        " (this check is authoritative, the agent's is defence in depth): an `X-Principal`"
        " that differs is 403 `principal_mismatch`; without a user token the only principal"
        " accepted is the calling agent's own identity (a self-subjected run), anything else"
        " is 403 `principal_not_proven`",
        default=None,
    )
    user_audience: str | None = setting(
        "user",
        "with a user issuer (required there): the audience user tokens must carry (`aud`)",
        default=None,
        min_length=1,
    )
    user_principal_claim: str = setting(
        "user",
        "the claim of a user token that names the principal",
        default=names.DEFAULT_PRINCIPAL_CLAIM,
        min_length=1,
    )
    user_jwks_url: str | None = setting(
        "user",
        "where to fetch the user issuer's keys instead of discovery (https); fetched on first"
        " use and again for an unknown key id at most every 30 s",
        default=None,
    )
    user_ca_file: Path | None = setting(
        "user",
        "CA bundle for the user issuer and its keys",
        default=None,
        default_doc="system CAs",
    )
    user_leeway: float = setting(
        "user",
        "seconds of clock skew tolerated on a user token's `exp`, `nbf` and `iat`",
        default=DEFAULT_LEEWAY,
        ge=0,
        le=300,
    )

    @model_validator(mode="after")
    def _check(self) -> MemorySettings:
        problems: list[str] = []
        if self.user_issuer is not None:
            if self.auth_mode == "off":
                problems.append("KAOS_MEMORY_USER_ISSUER needs KAOS_MEMORY_AUTH_MODE")
            if not self.user_audience:
                problems.append("KAOS_MEMORY_USER_ISSUER needs KAOS_MEMORY_USER_AUDIENCE")
            for variable, url in (
                ("KAOS_MEMORY_USER_ISSUER", self.user_issuer),
                ("KAOS_MEMORY_USER_JWKS_URL", self.user_jwks_url),
            ):
                if url is not None and not url.startswith("https://"):
                    problems.append(f"{variable} must be an https:// URL")
        if self.auth_mode == "jwks" and not self.auth_issuer:
            problems.append("KAOS_MEMORY_AUTH_MODE=jwks needs KAOS_MEMORY_AUTH_ISSUER")
        if self.auth_mode == "tokenreview" and not self.auth_api_server:
            problems.append("KAOS_MEMORY_AUTH_MODE=tokenreview needs KAOS_MEMORY_AUTH_API_SERVER")
        for variable, url in (
            ("KAOS_MEMORY_AUTH_ISSUER", self.auth_issuer),
            ("KAOS_MEMORY_AUTH_JWKS_URL", self.auth_jwks_url),
            ("KAOS_MEMORY_AUTH_API_SERVER", self.auth_api_server),
        ):
            # Keys and TokenReviews (with the service's own bearer token) travel over TLS only.
            if url is not None and not url.startswith("https://"):
                problems.append(f"{variable} must be an https:// URL")
        if self.storage == "external" and not self.dsn:
            problems.append("KAOS_MEMORY_STORAGE=external needs KAOS_MEMORY_DSN")
        if not _COLLECTION_RE.match(self.collection):
            problems.append(
                f"KAOS_MEMORY_COLLECTION={self.collection!r}: 3-63 letters, digits or '_', "
                "starting and ending with a letter or digit"
            )
        trigger, target = self.effective_fold_trigger, self.effective_fold_target
        if not 0 < target < trigger <= self.token_budget:
            problems.append(
                "need 0 < KAOS_MEMORY_FOLD_TARGET < KAOS_MEMORY_FOLD_TRIGGER <= "
                f"KAOS_MEMORY_TOKEN_BUDGET, got target={target}, trigger={trigger}, "
                f"budget={self.token_budget}"
            )
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def effective_fold_trigger(self) -> int:
        return self.token_budget if self.fold_trigger is None else self.fold_trigger

    @property
    def effective_fold_target(self) -> int:
        return self.token_budget // 2 if self.fold_target is None else self.fold_target

    @property
    def group(self) -> str:
        """The store group: the collection name, stable within one store."""
        return self.collection

    # --- one typed view per concern ---------------------------------------------------------

    @property
    def http(self) -> HttpSettings:
        return HttpSettings(
            self.host,
            self.port,
            self.log_level,
            self.max_body_bytes,
            self.max_concurrent_requests,
        )

    @property
    def backend(self) -> StorageSettings:
        return StorageSettings(
            mode=self.storage,
            data_dir=self.data_dir,
            dsn=self.dsn,
            collection=self.collection,
            pg_pool_size=self.pg_pool_size,
            pg_partitions=self.pg_partitions,
            vector_cache_mb=self.vector_cache_mb,
        )

    @property
    def models(self) -> ModelSettings:
        return ModelSettings(
            summarization_base_url=self.summarization_base_url or self.model_base_url,
            summarization_api_key=self.summarization_api_key or self.api_key,
            summarization_model=self.summarization_model,
            embedding_base_url=self.embedding_base_url or self.model_base_url,
            embedding_api_key=self.embedding_api_key or self.api_key,
            embedding_model=self.embedding_model,
            embedding_dims=self.embedding_dims,
            timeout=self.model_timeout,
            embed_timeout=self.embed_timeout,
            answer_retries=self.answer_retries,
            digest_prompt=self.digest_prompt,
            extraction_prompt=self.extraction_prompt,
        )

    @property
    def tiers(self) -> TierSettings:
        return TierSettings(
            token_budget=self.token_budget,
            max_events=self.max_events,
            fold_trigger=self.effective_fold_trigger,
            fold_target=self.effective_fold_target,
            digest_retention=self.digest_retention,
            digest_max_tokens=max(2 * self.token_budget, 1024)
            if self.digest_max_tokens is None
            else self.digest_max_tokens,
            recall_top_k=self.recall_top_k,
            recall_timeout=self.recall_timeout,
            recall_threshold=self.recall_threshold,
        )

    @property
    def posture(self) -> PostureSettings:
        return PostureSettings(
            max_read_scope=self.max_read_scope,
            require_principal=self.require_principal,
            require_agent_identity=self.require_agent_identity,
            default_failure_mode=self.default_failure_mode,
        )

    @property
    def executor(self) -> ExecutorSettings:
        return ExecutorSettings(
            workers=self.executor_workers,
            queue_size=self.executor_queue_size,
            retries=self.executor_retries,
            backoff=self.executor_backoff,
            backoff_max=self.executor_backoff_max,
            drain_timeout=self.drain_timeout,
        )

    @property
    def consolidation(self) -> ConsolidationSettings:
        return ConsolidationSettings(
            lease_ttl=self.lease_ttl,
            sweep_interval=self.sweep_interval,
            idle_flush_seconds=self.idle_flush_seconds,
            extraction_max_attempts=self.extraction_max_attempts,
            extraction_concurrency=self.extraction_concurrency,
        )

    @property
    def auth(self) -> CallerAuthSettings:
        return CallerAuthSettings(
            mode=self.auth_mode,
            issuer=self.auth_issuer,
            jwks_url=self.auth_jwks_url,
            api_server=self.auth_api_server,
            ca_file=self.auth_ca_file,
            token_file=self.auth_token_file,
            leeway=self.auth_leeway,
            review_cache_seconds=self.auth_review_cache_seconds,
            callers_file=self.callers_file,
        )

    @property
    def user_auth(self) -> UserAuthSettings | None:
        """How forwarded user tokens are verified; ``None``: principals as sent."""
        return UserAuthSettings.of(self)

    @property
    def admin(self) -> AdminSettings:
        return AdminSettings(
            store_namespace=self.store_namespace,
            store_name=self.store_name,
            api_server=self.auth_api_server,
            ca_file=self.auth_ca_file,
            token_file=self.auth_token_file,
            cache_seconds=self.admin_review_cache_seconds,
        )

    @property
    def sqlite_path(self) -> Path:
        return self.data_dir / "conversation.sqlite3"

    @property
    def chroma_dir(self) -> Path:
        return self.data_dir / "chroma"

    @property
    def mem0_dir(self) -> Path:
        return self.data_dir / "mem0"

    @property
    def mem0_history_path(self) -> Path:
        # Local mode only: external mode keeps no node-local history (storage.history).
        return self.mem0_dir / "history.db"


def load_memory_settings(environ: Mapping[str, str] | None = None) -> MemorySettings:
    """Settings from the environment, honouring the seed's per-mode collection variables."""
    env = dict(os.environ if environ is None else environ)
    for name, earlier in _EARLIER_NAMES.items():
        if not env.get(name) and env.get(earlier):
            env[name] = env[earlier]
    if not env.get("KAOS_MEMORY_COLLECTION"):
        storage = env.get("KAOS_MEMORY_STORAGE") or "local"
        alias = _MODE_COLLECTION_ENV.get(storage)
        if alias and env.get(alias):
            env["KAOS_MEMORY_COLLECTION"] = env[alias]
    return MemorySettings.from_env(env)


__all__ = ["MemorySettings", "SettingsError", "load_memory_settings"]
