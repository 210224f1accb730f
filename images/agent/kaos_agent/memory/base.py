"""What the agent loop needs from memory: recall before a run, remember after it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kaos_core.memory.contract import Turn, WriteOrigin
from pydantic_ai.messages import ModelMessage

from kaos_agent.context import RunDeps


@dataclass(frozen=True)
class Recalled:
    """Context for one run: replayed history and a block for the instructions."""

    history: list[ModelMessage] = field(default_factory=list)
    facts_block: str | None = None
    degraded: bool = False


class Memory(Protocol):
    """One memory backend of an agent (none, pod-local window, or the memory service)."""

    async def recall(self, deps: RunDeps, query: str) -> Recalled:
        """Context for a run. Never raises: a failure gives what is left, ``degraded``."""
        ...

    async def remember(
        self, deps: RunDeps, turns: Sequence[Turn], origin: WriteOrigin = "conversation"
    ) -> None:
        """Persist a run's turns (``origin``: a conversation's, or facts saved on purpose).
        Raises ``MemoryWriteFailed`` only in strict mode."""
        ...

    async def close(self) -> None: ...


class MemoryWriteFailed(Exception):
    """A write failed under ``failureMode: strict``: the caller asked to know."""


class NoMemory:
    """Memory off: every run starts from the request alone."""

    async def recall(self, deps: RunDeps, query: str) -> Recalled:
        return Recalled()

    async def remember(
        self, deps: RunDeps, turns: Sequence[Turn], origin: WriteOrigin = "conversation"
    ) -> None:
        return None

    async def close(self) -> None:
        return None
