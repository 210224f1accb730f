"""Status as the API conventions ask: conditions with observedGeneration, kept times.

``StatusBuilder`` assembles a resource's new status from the previous one so that a
condition whose status did not change keeps its ``lastTransitionTime``; the controller
writes the result through the status subresource only when it differs from what the
API server already holds.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kaos_core.crds.common import Condition, ConditionStatus

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def rfc3339(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class StatusBuilder:
    """The next status of one object, built from its current one."""

    def __init__(
        self, current: dict[str, Any] | None, generation: int, clock: Clock = utc_now
    ) -> None:
        self._old: dict[str, Condition] = {
            c["type"]: Condition.model_validate(c) for c in (current or {}).get("conditions", [])
        }
        self._generation = generation
        self._clock = clock
        self._conditions: dict[str, Condition] = {}
        self.fields: dict[str, Any] = {}
        # Seconds after which the object is to be reconciled again without any event: a
        # read of a backend (capabilities, tools) failed, and nothing else would retry it.
        self.recheck_in: float | None = None

    def recheck(self, seconds: float) -> None:
        """Ask for another reconcile after ``seconds`` (the earliest asked wins)."""
        self.recheck_in = seconds if self.recheck_in is None else min(self.recheck_in, seconds)

    def condition(
        self, type_: str, status: bool | ConditionStatus, reason: str, message: str = ""
    ) -> None:
        value: ConditionStatus = (
            ("True" if status else "False") if isinstance(status, bool) else status
        )
        old = self._old.get(type_)
        when = (
            old.last_transition_time
            if old is not None and old.status == value
            else rfc3339(self._clock())
        )
        self._conditions[type_] = Condition(
            type=type_,
            status=value,
            reason=reason,
            message=message,
            last_transition_time=when,
            observed_generation=self._generation,
        )

    def build(self) -> dict[str, Any]:
        status = {k: v for k, v in self.fields.items() if v is not None}
        status["observedGeneration"] = self._generation
        status["conditions"] = [c.to_wire() for c in self._conditions.values()]
        return status


def status_differs(current: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Whether writing ``new`` would change anything (condition order ignored)."""

    def norm(s: dict[str, Any] | None) -> dict[str, Any]:
        s = dict(s or {})
        conds = sorted(s.pop("conditions", []) or [], key=lambda c: c.get("type", ""))
        return {**s, "conditions": [{"message": "", **c} for c in conds]}

    return norm(current) != norm(new)


def retrying_status(current: dict[str, Any] | None, message: str) -> dict[str, Any]:
    """The current status with only its message replaced, for a temporary error.

    The conditions and phase stay as they were: the API server being briefly unreachable
    says nothing about the workload, so a Ready resource is not flipped to not Ready
    (its dependents would react), but the status says why the operator is retrying.
    """
    return {**(current or {}), "message": message}
