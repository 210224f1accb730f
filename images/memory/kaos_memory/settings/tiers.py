"""The tiers' shape: the short-term window, the fold it triggers, the digest, and recall
from the long-term tier."""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

from kaos_core.settings import SettingsGroup, setting
from kaos_core.trust import DEFAULT_INJECT_SOURCES, FACT_SOURCES

DEFAULT_TOKEN_BUDGET = 4096


def _budget(data: dict[str, Any]) -> int:
    return int(data.get("token_budget", DEFAULT_TOKEN_BUDGET))


class TierSettings(SettingsGroup):
    """The window, the fold it triggers, digest retention, and recall."""

    title: ClassVar[str] = "Tiers"

    token_budget: int = setting(
        "short-term window budget in tokens (approximation: `ceil(chars/4) + 4` per turn);"
        " the window is the newest turns that fit, computed on read",
        default=DEFAULT_TOKEN_BUDGET,
        ge=16,
    )
    max_events: int = setting(
        "hard cap on turns in the window; more unfolded turns than this also trigger a fold",
        default=2000,
        ge=2,
    )
    fold_trigger: int = setting(
        "a write that leaves more unfolded tokens than this schedules a fold",
        default_factory=_budget,
        ge=1,
        default_doc="= budget",
    )
    fold_target: int = setting(
        "a fold evicts the oldest turns until at most this many tokens stay unfolded. Must"
        " hold: `0 < FOLD_TARGET < FOLD_TRIGGER <= TOKEN_BUDGET`",
        default_factory=lambda data: _budget(data) // 2,
        ge=1,
        default_doc="budget / 2",
    )
    digest_retention: int = setting(
        "digest versions kept per session; older versions are pruned", default=20, ge=1
    )
    digest_max_tokens: int = setting(
        "longest digest answer kept, in the window's token count; a longer one is unusable"
        " (a model that rambles or repeats itself) and the previous version stays. The"
        " digest is recalled beside the window: twice the window's budget (or 1024 for a small"
        " window) is far more than a concise narrative needs",
        default_factory=lambda data: max(2 * _budget(data), 1024),
        ge=16,
        default_doc="budget * 2, at least 1024",
    )
    recall_top_k: int = setting(
        "long-term facts per recall when the request gives no `top_k`", default=10, ge=1, le=100
    )
    recall_timeout: float = setting(
        "seconds the long-term search of a recall may take before the answer is `degraded`;"
        " also bounds the vector-store check of a strict write",
        default=5.0,
        gt=0,
    )
    long_term_enabled: bool = setting(
        "`false`: a window-and-digest store with no vector index: no Chroma or pgvector"
        " collection is created and Mem0 is not loaded, folds write digests but extract"
        " nothing, the long-term tier of a recall or list answers no facts (not degraded),"
        " and a forget erases the conversational tiers",
        default=True,
    )
    recall_threshold: float = setting(
        "minimum semantic score of a recalled fact (Mem0's default; cosine on pgvector,"
        " `1/(1+d²)` on Chroma)",
        default=0.1,
        ge=0,
        le=1,
    )

    inject_sources: str = setting(
        "comma-separated sources of the facts a `context` recall (what an agent puts into a"
        " run by itself) returns: `user` (stated by the user), `saved` (saved on purpose by"
        " the agent), `assistant` (inferred from the assistant's text), `tool` (taken from a"
        " tool's output); a `search` recall returns every fact with its provenance",
        default=",".join(DEFAULT_INJECT_SOURCES),
    )

    @cached_property
    def injected(self) -> frozenset[str]:
        # Read on every context recall: split once.
        return frozenset(s.strip() for s in self.inject_sources.split(",") if s.strip())

    def problems(self, prefix: str) -> list[str]:
        found: list[str] = []
        unknown = sorted(self.injected - set(FACT_SOURCES))
        if unknown or not self.injected:
            found.append(
                f"{self.env_name('inject_sources', prefix)}: give one or more of"
                f" {', '.join(FACT_SOURCES)}"
                + (f"; unknown: {', '.join(unknown)}" if unknown else "")
            )
        target, trigger, budget = self.fold_target, self.fold_trigger, self.token_budget
        if 0 < target < trigger <= budget:
            return found
        names = [self.env_name(f, prefix) for f in ("fold_target", "fold_trigger", "token_budget")]
        return [
            *found,
            f"need 0 < {names[0]} < {names[1]} <= {names[2]}, got target={target},"
            f" trigger={trigger}, budget={budget}",
        ]
