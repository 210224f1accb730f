"""The audit trail of tool calls, delegations and approval decisions
(``kaos_agent.audit.log``)."""
