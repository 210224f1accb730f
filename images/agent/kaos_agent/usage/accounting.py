"""What a run may spend and what it spent: ``kaos_agent.runner.Accounting`` on the ledger.

``admit`` is asked before a run's first model call (and its memory recall): the run's
token limit is the least of ``TASK_MAX_TOKENS`` and what is left today of each day budget
(``AGENT_BUDGET_TOKENS_PER_DAY`` for the agent, ``..._PER_USER_PER_DAY`` for the run's
principal, ``anonymous`` without one); with nothing left of one it refuses the run, 429
``budget_exhausted`` with ``Retry-After`` the seconds to the next UTC midnight. Without day
budgets it reads nothing. A ledger that cannot be read while a day budget is set refuses
the run (503): a budget is not waived because its count is out of reach.

``record`` adds a finished run's tokens to its principal's day and to
``kaos_agent_tokens_total{agent, kind}`` (``input``, ``output``); it never raises: a failed
write is logged and counted in ``kaos_agent_usage_write_failures_total``.
Two runs admitted at once may each use what was left: a budget is kept per run, not per
token in flight.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from kaos_core.errors import KaosError, TooManyRequests
from prometheus_client import CollectorRegistry, Counter

from kaos_agent.context import RunDeps
from kaos_agent.runner import TokenUsage
from kaos_agent.settings import TokenBudgets
from kaos_agent.usage.ledger import ANONYMOUS, Ledger, seconds_to_next_day, utc_day

log = logging.getLogger(__name__)


class BudgetExhausted(TooManyRequests):
    """A day budget has no tokens left: no run starts before the next UTC day."""

    code = "budget_exhausted"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, headers=[("Retry-After", str(retry_after))])
        self.retry_after = retry_after


@dataclass(frozen=True)
class UsageMetrics:
    tokens: Counter
    write_failures: Counter

    @classmethod
    def create(cls, registry: CollectorRegistry) -> UsageMetrics:
        return cls(
            tokens=Counter(
                "tokens",
                "Tokens the agent's runs used, as the model reported them, by kind (input,"
                " output).",
                ["agent", "kind"],
                namespace="kaos_agent",
                registry=registry,
            ),
            write_failures=Counter(
                "usage_write_failures",
                "Runs whose tokens could not be added to the usage ledger.",
                namespace="kaos_agent",
                registry=registry,
            ),
        )


def principal_of(deps: RunDeps) -> str:
    return deps.principal or ANONYMOUS


class UsageAccounting:
    """One agent's ``Accounting``: its budgets, its ledger, its metrics."""

    def __init__(
        self,
        agent: str,
        budgets: TokenBudgets,
        ledger: Ledger,
        metrics: UsageMetrics,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.agent = agent
        self.budgets = budgets
        self.ledger = ledger
        self.metrics = metrics
        self.clock = clock

    async def admit(self, deps: RunDeps) -> int | None:
        budgets = self.budgets
        limits = [budgets.max_tokens]
        per_day, per_user = budgets.tokens_per_day, budgets.tokens_per_user_per_day
        if per_day is None and per_user is None:
            return budgets.max_tokens
        now = self.clock()
        principal = principal_of(deps)
        spent = await self.ledger.spent(self.agent, principal, utc_day(now))
        if per_day is not None:
            left = per_day - spent.agent
            if left <= 0:
                raise self._exhausted(f"this agent's budget of {per_day} tokens a day", now)
            limits.append(left)
        if per_user is not None:
            left = per_user - spent.principal
            if left <= 0:
                raise self._exhausted(f"your budget of {per_user} tokens a day on this agent", now)
            limits.append(left)
        return min(limit for limit in limits if limit is not None)

    def _exhausted(self, what: str, now: float) -> BudgetExhausted:
        retry_after = seconds_to_next_day(now)
        log.info("run refused: a token budget is used up", extra={"agent": self.agent})
        return BudgetExhausted(
            f"{what} is used up for today (UTC); it renews in {retry_after} seconds",
            retry_after,
        )

    async def record(self, deps: RunDeps, entry: str, usage: TokenUsage) -> None:
        self.metrics.tokens.labels(self.agent, "input").inc(usage.input_tokens)
        self.metrics.tokens.labels(self.agent, "output").inc(usage.output_tokens)
        day = utc_day(self.clock())
        try:
            await self.ledger.add(
                self.agent, principal_of(deps), day, usage.input_tokens, usage.output_tokens
            )
        except (KaosError, RuntimeError):  # the answer exists: only its count is lost
            self.metrics.write_failures.inc()
            log.warning("a run's tokens could not be recorded", extra={"entry": entry})
