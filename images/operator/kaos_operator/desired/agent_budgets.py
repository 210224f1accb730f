"""An Agent's token budgets in its pods: ``config.taskConfig.maxTokens`` as
``TASK_MAX_TOKENS`` and ``spec.budgets`` as ``AGENT_BUDGET_TOKENS_PER_DAY`` and
``AGENT_BUDGET_TOKENS_PER_USER_PER_DAY``; a budget left out is not written (no limit)."""

from __future__ import annotations

from kaos_core import agent_env as names
from kaos_core.crds import Agent


def budgets_env(agent: Agent) -> dict[str, str]:
    env: dict[str, str] = {}
    task = agent.spec.config.task_config
    if task is not None and task.max_tokens is not None:
        env[names.TASK_MAX_TOKENS] = str(task.max_tokens)
    budgets = agent.spec.budgets
    if budgets is not None:
        if budgets.tokens_per_day is not None:
            env[names.AGENT_BUDGET_TOKENS_PER_DAY] = str(budgets.tokens_per_day)
        if budgets.tokens_per_user_per_day is not None:
            env[names.AGENT_BUDGET_TOKENS_PER_USER_PER_DAY] = str(budgets.tokens_per_user_per_day)
    return env
