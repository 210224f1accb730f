"""How healthy a KAOS object is, as one word and one tone, for every view (pure).

The CLI's tables and ``describe``, ``system status`` and the console all colour objects
and conditions through this module, so the same state never reads green in one place and
red in another. Tones, not colours: each view maps them to its own palette.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from kaos_core.crds import reasons

from kaos_cli.objects import condition, status

Tone = Literal["ok", "warn", "error", "progress", "unknown"]

# Condition types whose True means trouble (the API conventions' "abnormal-true"
# polarity); every other condition is normal when True.
ABNORMAL_TRUE = frozenset({reasons.MEMORY_DEGRADED})

# Ready=False reasons that no amount of waiting resolves. Refused specs: someone must
# change the resource.
SPEC_REFUSED = frozenset(
    {
        reasons.OVERRIDE_REFUSED,
        reasons.INVALID_SPEC,
        reasons.APPLY_FAILED,
        reasons.NAME_CONFLICT,
        reasons.RUNTIME_NOT_FOUND,
        reasons.USER_SCOPE_NEEDS_USER_IDENTITY,
        reasons.READ_SCOPE_ABOVE_CEILING,
        reasons.MEMORY_NOT_REMOTE,
    }
)
# Failing workloads: an image or a container that fails the same way on every retry.
WORKLOAD_FAILED = frozenset({reasons.IMAGE_PULL_FAILED, reasons.CRASH_LOOPING})
STUCK_REASONS = SPEC_REFUSED | WORKLOAD_FAILED


def condition_tone(type_: str, value: str, reason: str = "") -> Tone:
    """The tone of one condition: its polarity decides whether True is good, and a Ready
    that is False is an error only for a reason that will not clear by itself (a Pending
    object's Ready=False is on its way, drawn as its badge is)."""
    if value not in ("True", "False"):
        return "unknown"
    bad = (value == "True") if type_ in ABNORMAL_TRUE else (value == "False")
    if not bad:
        return "ok"
    if type_ in ABNORMAL_TRUE:
        return "warn"
    if type_ == reasons.READY and (not reason or reason in STUCK_REASONS):
        return "error"
    return "progress"


def phase_tone(phase: str | None) -> Tone:
    """The tone of a ``status.phase`` by itself (a list's PHASE column)."""
    if phase == reasons.PHASE_READY:
        return "ok"
    if phase == reasons.PHASE_FAILED:
        return "error"
    if phase in (reasons.PHASE_PENDING, reasons.PHASE_WAITING):
        return "progress"
    return "unknown"


@dataclass(frozen=True)
class Health:
    """One object's health: the word a column shows, its tone, and why (may be empty)."""

    word: str
    tone: Tone
    reason: str = ""

    @property
    def degraded(self) -> bool:
        return self.word == "Degraded"


def health(obj: dict[str, Any]) -> Health:
    """Ready and serving, Ready but degraded, failed, or on its way (and why)."""
    st = status(obj)
    ready = condition(obj, reasons.READY)
    phase = str(st.get("phase") or "")
    if ready is None:
        return Health(phase or "Unknown", "progress" if phase else "unknown")
    why = str(ready.get("reason") or "")
    if ready.get("status") == "True":
        for c in st.get("conditions") or []:
            if c.get("type") in ABNORMAL_TRUE and c.get("status") == "True":
                return Health("Degraded", "warn", str(c.get("reason") or c.get("type")))
        return Health(reasons.PHASE_READY, "ok")
    if phase == reasons.PHASE_FAILED or why in STUCK_REASONS:
        return Health(reasons.PHASE_FAILED, "error", why)
    return Health(phase or reasons.PHASE_PENDING, "progress", why)
