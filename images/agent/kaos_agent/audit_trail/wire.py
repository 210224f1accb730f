"""The answer of ``GET /v1/audit``: one model the handler writes and the OpenAPI document
publishes, so the two cannot drift. Absent values are left out of an item."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kaos_agent.audit.log import AuditEntry


class AuditItem(BaseModel):
    """One tool call, delegation or approval decision."""

    model_config = ConfigDict(populate_by_name=True, frozen=True)

    agent: str = Field(description="The agent that made the call.")
    at: float = Field(description="When the call started (or the decision), epoch seconds.")
    kind: Literal["tool", "delegation", "approval"]
    name: str = Field(description="The tool's name, or the peer agent's.")
    outcome: str = Field(
        description="`ok`, `failed` (the tool or the delegation refused or failed), `error`,"
        " `retry`, `deferred` (waits for an approval), `cancelled`; for an approval"
        " `approved`, `denied` or `timeout`."
    )
    task: str | None = Field(default=None, description="The A2A task of the run.")
    session: str | None = None
    identity: str | None = Field(
        default=None, description="Who called: the delegating agent, else the run's principal."
    )
    user: str | None = Field(default=None, description="The principal the run acts for.")
    arguments_digest: str | None = Field(
        default=None,
        alias="argumentsDigest",
        description="SHA-256 (hex) of the arguments' canonical JSON (keys sorted, no spaces).",
    )
    arguments: str | None = Field(
        default=None,
        description="The arguments' canonical JSON; only when the Agent records arguments.",
    )
    duration_ms: float | None = Field(default=None, alias="durationMs")
    decided_by: str | None = Field(
        default=None, alias="decidedBy", description="An approval's decider, or `timeout`."
    )

    @classmethod
    def of(cls, agent: str, entry: AuditEntry) -> AuditItem:
        return cls(
            agent=agent,
            at=entry.at,
            kind=entry.kind,
            name=entry.name,
            outcome=entry.outcome,
            task=entry.task,
            session=entry.session,
            identity=entry.identity,
            user=entry.user,
            argumentsDigest=entry.arguments_digest,
            arguments=entry.arguments,
            durationMs=entry.duration_ms,
            decidedBy=entry.decided_by,
        )


class AuditList(BaseModel):
    """``GET /v1/audit``: the latest matching entries, oldest first (in call order)."""

    items: list[AuditItem]

    def to_wire(self) -> dict[str, object]:
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
