"""The sources a long-term fact can come from, and which of them an agent trusts enough to
put into a run by itself: shared by the memory contract and the MemoryStore resource."""

from __future__ import annotations

from typing import Literal

# Who a long-term fact came from (its provenance's ``source``), most trusted first: stated
# by the user, saved on purpose by the agent (``save_memory``), inferred from the
# assistant's own text, taken from a tool's output.
FactSource = Literal["user", "saved", "assistant", "tool"]
FACT_SOURCES: tuple[FactSource, ...] = ("user", "saved", "assistant", "tool")
# Injected by default: what the user said and what the agent saved on purpose.
DEFAULT_INJECT_SOURCES: tuple[FactSource, ...] = ("user", "saved")

__all__ = ["DEFAULT_INJECT_SOURCES", "FACT_SOURCES", "FactSource"]
