"""An Agent's token budgets: how many tokens it may spend in one UTC day, in all and for
each user.

The agent counts the tokens its model reports per (principal, UTC day) beside its A2A
task store (``kaos_agent.usage``); a run is admitted only while both budgets have tokens
left, and may use at most what is left (a run that crosses it ends with finish reason
``length``). A new run over a budget is refused 429 ``budget_exhausted`` with
``Retry-After`` (seconds to the next UTC midnight). Callers without a verified principal
share one budget, ``anonymous``. The limit of one run is ``config.taskConfig.maxTokens``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kaos_core.crds.common import CRDModel

# Tokens in one UTC day: enough for any model, small enough for a 64-bit counter.
TOKENS_PER_DAY_MAX = 10**12


class AgentBudgets(CRDModel):
    """Tokens per UTC day; a budget left out is unlimited."""

    tokens_per_day: int | None = Field(
        default=None,
        ge=1,
        le=TOKENS_PER_DAY_MAX,
        description="Tokens the whole Agent may use per UTC day, every user's together.",
    )
    tokens_per_user_per_day: int | None = Field(
        default=None,
        ge=1,
        le=TOKENS_PER_DAY_MAX,
        description="Tokens each principal may use per UTC day (callers without one count"
        ' together as "anonymous").',
    )


def budgets_field() -> Any:
    """``spec.budgets``: optional; absent, no day budget."""
    return Field(
        default=None,
        description="Token budgets per UTC day, of the whole Agent and of each user; a new"
        " run over one is refused 429 with Retry-After (default: none).",
    )
