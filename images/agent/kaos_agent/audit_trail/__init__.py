"""The audit trail kept beside the task store and served at ``GET /v1/audit``
(``kaos_agent.audit_trail.http``); what an entry is and how a call is recorded is
``kaos_agent.audit``."""
