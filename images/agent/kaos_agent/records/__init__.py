"""What the records the agent keeps beside its task store share: the store of the mode
``TASK_STORE_TYPE`` names (``stores``), their retention sweep (``sweeps``) and, for the ones
served to operators (the audit trail, the usage ledger), who may read them (``access``),
their query's parameters (``query``) and their place in the OpenAPI document (``openapi``)."""
