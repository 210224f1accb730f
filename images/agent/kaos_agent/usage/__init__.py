"""Token accounting and budgets: every run's tokens in a ledger beside the task store, the
day budgets and a run's limit enforced before it starts (``kaos_agent.usage.accounting``),
``GET /v1/usage`` for chargeback (``kaos_agent.usage.http``)."""

from __future__ import annotations

from kaos_agent.usage.http import ACCOUNTING_KEY, setup_usage

__all__ = ["ACCOUNTING_KEY", "setup_usage"]
