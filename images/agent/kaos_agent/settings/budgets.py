"""Token accounting and budgets (``kaos_agent.usage``): what one run and one UTC day may
spend, and how long the usage ledger keeps its days.

The operator writes them from the Agent's ``config.taskConfig.maxTokens`` and
``spec.budgets`` (none when absent).
"""

from __future__ import annotations

from typing import ClassVar

from kaos_core import agent_env as env
from kaos_core.settings import SettingsGroup, setting

DAY_SECONDS = 86400
TOKENS_MAX = 10**12


class TokenBudgets(SettingsGroup):
    """Tokens a run and a UTC day may use (``None``: no limit)."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Token budgets"

    max_tokens: int | None = setting(
        "tokens (input and output, over all its model requests) one run may use; the run"
        " that crosses it stops with a final answer saying so and finish reason `length`",
        env=env.TASK_MAX_TOKENS,
        default=None,
        default_doc="no limit",
        ge=1,
        le=10**9,
    )
    tokens_per_day: int | None = setting(
        "tokens the whole agent may use per UTC day, every user's together; a new run with"
        " none left is refused 429 `budget_exhausted` with `Retry-After` (seconds to the"
        " next UTC midnight), a run may use at most what is left",
        env=env.AGENT_BUDGET_TOKENS_PER_DAY,
        default=None,
        default_doc="no limit",
        ge=1,
        le=TOKENS_MAX,
    )
    tokens_per_user_per_day: int | None = setting(
        "tokens each principal may use per UTC day, kept the same way (callers without a"
        " principal count together as `anonymous`)",
        env=env.AGENT_BUDGET_TOKENS_PER_USER_PER_DAY,
        default=None,
        default_doc="no limit",
        ge=1,
        le=TOKENS_MAX,
    )
    retention_days: int = setting(
        "days the usage ledger keeps a day's counts (1 to 3650); older days are deleted by"
        " a sweep every hour and at start",
        env=env.AGENT_USAGE_RETENTION_DAYS,
        default=400,
        ge=1,
        le=3650,
    )

    @property
    def retention_seconds(self) -> float:
        return float(self.retention_days * DAY_SECONDS)
