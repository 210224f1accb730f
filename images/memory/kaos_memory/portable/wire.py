"""The export and import endpoints' request and answer (the records themselves are
``portable.format``'s)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from kaos_memory.portable.format import ExportScope

__all__ = ["ExportRequest", "ImportResponse"]


class ExportRequest(ExportScope):
    """``POST /v1/export``: whose memory (``store``: all of it)."""


class ImportResponse(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    turns: int = Field(description="turns written")
    digests: int = Field(description="digest versions written")
    facts: int = Field(description="facts written (embedded by this store's embedder)")
    skipped: int = Field(description="records the store already held (an import repeated)")
    reembedded: bool = Field(
        description="the source's embedding model differs from this store's (or is unknown)"
    )
