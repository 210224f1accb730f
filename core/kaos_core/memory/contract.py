"""Memory HTTP contract v1: one request and one response model per endpoint.

The service and every client import these models, so the two sides cannot drift. The
pinned text is ``docs/memory-http-v1.md``. Request models are strict (no type
coercion) and forbid unknown fields; identity never travels in a body (see
``kaos_core.wire``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kaos_core.trust import FactSource

Level = Literal["session", "agent", "user", "store"]
Role = Literal["user", "assistant", "system", "tool"]
Tier = Literal["short_term", "medium_term", "long_term"]
FailureMode = Literal["soft", "strict"]
# Where the turns of a write come from: the conversation (each turn's role says who), or
# facts the agent saves on purpose, ``saved`` or, when the run had read a tool's output
# before the save, ``tool`` (the text may be the tool's, not the user's).
WriteOrigin = Literal["conversation", "saved", "tool"]
# What a recall is for: ``context`` is what an agent puts into a run's instructions by
# itself, so the store's injection policy (``KAOS_MEMORY_INJECT_SOURCES``) decides which
# facts it gets; ``search`` (an agent's search_memory, an administrator) gets every fact,
# each with its provenance to judge it by.
RecallPurpose = Literal["context", "search"]

ALL_TIERS: tuple[Tier, ...] = ("short_term", "medium_term", "long_term")
CONVERSATIONAL_TIERS: frozenset[Tier] = frozenset({"short_term", "medium_term"})

# Read scopes an agent can be entitled to, narrowest first. ``store`` is administrative
# and sits outside the order: it is never granted to an agent.
READ_SCOPE_ORDER: tuple[Level, ...] = ("session", "agent", "user")

# Keys that would let a caller choose its own scope or attribution. Rejected anywhere in
# a body (top level or inside a turn) with 400: identity comes from headers only.
IDENTITY_FIELDS: frozenset[str] = frozenset(
    {
        "principal",
        "user_id",
        "agent_id",
        "agent_identity",
        "session_id",
        "run_id",
        "scope",
        "attribution",
    }
)


def scope_rank(level: Level) -> int:
    """Position of a read scope in the order session < agent < user."""
    return READ_SCOPE_ORDER.index(level)


def levels_up_to(ceiling: Level) -> tuple[Level, ...]:
    """Every agent-usable read scope no wider than ``ceiling``."""
    return READ_SCOPE_ORDER[: scope_rank(ceiling) + 1]


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Response(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def _aware_time(field: str) -> Callable[[str | None], str | None]:
    """A validator of an ISO 8601 time with its UTC offset, named ``field`` in its errors."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{field} must be an ISO 8601 time") from None
        if parsed.tzinfo is None:
            raise ValueError(f"{field} must give its UTC offset (Z or +hh:mm)")
        return value

    return check


class Turn(_Request):
    role: Role
    content: str = Field(max_length=256 * 1024)


class WriteRequest(_Request):
    turns: list[Turn] = Field(min_length=1, max_length=1000)
    infer: bool = True
    failure_mode: FailureMode | None = None
    origin: WriteOrigin = "conversation"
    # When the turns were said (an ISO 8601 time with its offset): a write that arrives
    # after an erasure of its conversation, recorded later than this, is dropped, so a
    # write that was late (sent after the answer, or retried) cannot outlive the forget.
    said_at: str | None = Field(default=None, max_length=64)

    _check_said_at = field_validator("said_at")(_aware_time("said_at"))


class WriteResponse(_Response):
    accepted: int
    scheduled: bool
    degraded: bool = False
    # The conversation was erased after ``said_at``: nothing was written.
    erased: bool = False


def _unique_tiers(value: list[Tier]) -> list[Tier]:
    if len(set(value)) != len(value):
        raise ValueError("include lists a tier twice")
    return value


class RecallRequest(_Request):
    level: Level
    query: str = Field(max_length=64 * 1024)
    top_k: int | None = Field(default=None, ge=1, le=100)
    include: list[Tier] = Field(
        default_factory=lambda: list(ALL_TIERS),
        min_length=1,
        json_schema_extra={"uniqueItems": True},
    )
    purpose: RecallPurpose = "search"
    # World time: the facts that were true then (an ISO 8601 time with its offset), instead
    # of the current ones.
    as_of: str | None = Field(default=None, max_length=64)
    # Every version of each fact, retired ones too, each with its validity.
    history: bool = False

    _check_include = field_validator("include")(_unique_tiers)
    _check_as_of = field_validator("as_of")(_aware_time("as_of"))

    @model_validator(mode="after")
    def _one_view(self) -> RecallRequest:
        if self.as_of is not None and self.history:
            raise ValueError("as_of and history select different views: give one")
        return self


class ListRequest(_Request):
    level: Level
    include: list[Tier] = Field(
        default_factory=lambda: list(ALL_TIERS),
        min_length=1,
        json_schema_extra={"uniqueItems": True},
    )
    limit: int = Field(default=100, ge=1, le=1000)
    cursor: str | None = Field(default=None, max_length=1024)
    # Retired versions of facts too (the current ones only by default).
    history: bool = False

    _check_include = field_validator("include")(_unique_tiers)


class ForgetRequest(_Request):
    level: Level
    failure_mode: FailureMode | None = None


class Provenance(_Response):
    """Where a long-term fact came from: the agent and session are the fact's own
    ``agent_id`` and ``session_id``."""

    source: FactSource
    # The session's turns (their sequence numbers) the fact was taken from.
    turns: list[int] = Field(default_factory=list)
    # World time: when the source turns were said (the latest of them).
    observed_at: str | None = None
    # System time: when the store recorded the fact.
    recorded_at: str
    # The model that extracted the fact; None when it was stored as written.
    model: str | None = None


class Fact(_Response):
    id: str
    text: str
    score: float | None = None
    agent_id: str | None = None
    user_id: str | None = None
    session_id: str | None = None
    created_at: str
    # None for a fact stored before provenance was recorded.
    provenance: Provenance | None = None
    # World time: since when the fact holds (its source turns' time), and until when, for a
    # fact a newer one replaced (None while it is current).
    valid_from: str | None = None
    valid_to: str | None = None
    # System time: when the store retired it, and the fact that replaced it.
    retired_at: str | None = None
    superseded_by: str | None = None


class LongTerm(_Response):
    facts: list[Fact] = Field(default_factory=list)
    block: str = ""


class MediumTerm(_Response):
    summary: str | None = None
    version: int | None = None


class WindowTurn(_Response):
    role: str
    content: str
    at: str


class ShortTerm(_Response):
    window: list[WindowTurn] = Field(default_factory=list)


class RecallResponse(_Response):
    long_term: LongTerm = Field(default_factory=LongTerm)
    medium_term: MediumTerm = Field(default_factory=MediumTerm)
    short_term: ShortTerm = Field(default_factory=ShortTerm)
    degraded: bool = False


class ListResponse(RecallResponse):
    next_cursor: str | None = None


class Forgotten(_Response):
    short_term: int = 0
    medium_term: int = 0
    long_term: int = 0


# What a receipt says it is, and where a store serves the key that signs its receipts.
RECEIPT_FORMAT = "kaos.memory.erasure-receipt/v1"
WELL_KNOWN_PATH = "/.well-known/kaos-memory-receipt-key"


class _Signed(BaseModel):
    # Unknown members are kept: a client re-serialises a receipt to check its signature.
    model_config = ConfigDict(extra="allow", frozen=True)


class ReceiptScope(_Signed):
    """The scope the erasure reached: what the caller asked for, nothing it did not name."""

    level: Level
    principal: str | None = None
    agent: str | None = None
    session: str | None = None


class ReceiptCounts(_Signed):
    short_term: int = 0
    medium_term: int = 0
    long_term: int = 0


class ErasureReceipt(_Signed):
    """A forget's receipt, signed by the store (Ed25519; ``kaos_core.memory.receipt`` says
    how it is serialised and checked, ``GET /.well-known/kaos-memory-receipt-key`` serves
    the key). ``erasure`` is the audit record's id; ``final`` false: the erasure was still
    pending when the receipt was signed."""

    format: str
    store: str
    erasure: int | None = None
    request_id: str
    issued_at: str
    scope: ReceiptScope
    forgotten: ReceiptCounts
    key_shredded: bool = False
    final: bool
    kid: str
    signature: str


class ForgetResponse(_Response):
    forgotten: Forgotten = Field(default_factory=Forgotten)
    degraded: bool = False
    # The id of the erasure's audit record (``GET /v1/audit``); ``None`` only when the
    # conversation store failed before the erasure could be recorded.
    receipt: int | None = None
    # The signed receipt of this forget (``None`` from a service that signs none).
    signed_receipt: ErasureReceipt | None = None


# ``quarantine_release``/``quarantine_erase``: an administrator released or erased quarantined
# facts (``kaos_core.memory.quarantine``); its ``moved.facts`` counts them.
AuditAction = Literal["forget", "export", "import", "quarantine_release", "quarantine_erase"]
# ``started``: recorded, not yet ended (or its replica died on the way); ``incomplete``: an
# export's stream broke off after it began; ``failed``: refused or failed before the end.
TransferOutcome = Literal["started", "complete", "incomplete", "failed"]


class AuditRequest(_Request):
    """One page of the store's audit (erasures, exports and imports), newest first."""

    limit: int = Field(default=100, ge=1, le=1000)
    cursor: str | None = Field(default=None, max_length=32, pattern=r"^[0-9]{1,20}$")
    action: AuditAction | None = Field(default=None, description="only records of this action")


class AuditActor(_Response):
    """Who erased: ``agent`` (its identity) or ``admin`` (the Kubernetes user name), and
    whether the service verified it (a token) or took it from a header (auth ``off``);
    ``retention``: the service, erasing what the store's retention says is past its age."""

    kind: Literal["agent", "admin", "unknown", "retention"]
    name: str | None = None
    verified: bool = False


class AuditScope(_Response):
    level: Level
    principal: str | None = None
    agent: str | None = None
    session: str | None = None


class Moved(_Response):
    """The records an export or import moved, and those the target already held."""

    turns: int = 0
    digests: int = 0
    facts: int = 0
    skipped: int = 0


class AuditRecord(_Response):
    """One erasure, export or import: who, when, which scope, how many records; never any
    content. A forget's counts are ``forgotten`` (``final``: its erasure finished); an
    export's or import's are ``moved`` (``final``: its ``outcome`` is ``complete``), its
    ``forgotten`` all zero. An import's scope is the store (the file says whose records it
    holds) and ``source`` its format (``kaos`` or ``mem0``)."""

    id: int
    at: str
    action: AuditAction = "forget"
    actor: AuditActor
    scope: AuditScope
    forgotten: Forgotten
    final: bool
    # The signed receipt the forget answered with (``None`` for erasures before receipts).
    signed_receipt: ErasureReceipt | None = None
    # How an export or import ended (``None`` for a forget).
    outcome: TransferOutcome | None = None
    moved: Moved | None = None
    source: str | None = None


class AuditResponse(_Response):
    records: list[AuditRecord] = Field(default_factory=list)
    next_cursor: str | None = None


class ErrorDetail(_Response):
    code: str
    message: str


class ErrorResponse(_Response):
    error: ErrorDetail
    request_id: str
