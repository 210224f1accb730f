"""Names of the environment variables through which the operator configures an agent pod.

The operator writes these and the agent runtime reads them; both import the names from
here so a rename cannot leave one side behind. Values, defaults, descriptions and
validation live with the runtime (``kaos_agent.settings``); list values use the
``kaos_core.endpoints`` codec. This module holds names only; request headers are
``kaos_core.wire``'s.
"""

from __future__ import annotations

# Identity and listening address.
AGENT_NAME = "AGENT_NAME"
AGENT_DESCRIPTION = "AGENT_DESCRIPTION"
AGENT_IDENTITY = "AGENT_IDENTITY"  # kaos_core.wire.agent_identity(ns, name)
AGENT_HOST = "AGENT_HOST"
AGENT_PORT = "AGENT_PORT"
AGENT_PUBLIC_URL = "AGENT_PUBLIC_URL"  # the URL peers and the agent card use
AGENT_INSTRUCTIONS = "AGENT_INSTRUCTIONS"
AGENT_A2A_ENABLED = "AGENT_A2A_ENABLED"

# Model.
MODEL_API_URL = "MODEL_API_URL"  # ModelAPI base URL as in its status; the runtime adds /v1
MODEL_NAME = "MODEL_NAME"
MODEL_API_KEY = "MODEL_API_KEY"
MODEL_TIMEOUT_SECONDS = "MODEL_TIMEOUT_SECONDS"
REASONING_LOOP_MAX_STEPS = "REASONING_LOOP_MAX_STEPS"
MODEL_TOOLS = "MODEL_TOOLS"  # auto | off (the model cannot call tools: none are offered)
# Sampling (the Agent's config.modelSettings), sent with every model request when set.
MODEL_TEMPERATURE = "MODEL_TEMPERATURE"
MODEL_MAX_TOKENS = "MODEL_MAX_TOKENS"
MODEL_TOP_P = "MODEL_TOP_P"
MODEL_SEED = "MODEL_SEED"

# Per-run budgets (the Agent's taskConfig).
TASK_MAX_TOOL_CALLS = "TASK_MAX_TOOL_CALLS"
TASK_MAX_WALL_SECONDS = "TASK_MAX_WALL_SECONDS"
TASK_MAX_TOKENS = "TASK_MAX_TOKENS"

# Tools and peers.
MCP_SERVERS = "MCP_SERVERS"  # comma list of name:url (or bare urls), url of the /mcp endpoint
AGENT_SUB_AGENTS = "AGENT_SUB_AGENTS"  # comma list of name:url, from agentNetwork.access
MAX_DELEGATION_DEPTH = "MAX_DELEGATION_DEPTH"
DELEGATION_TIMEOUT_SECONDS = "DELEGATION_TIMEOUT_SECONDS"

# Memory.
MEMORY_TYPE = "MEMORY_TYPE"  # none | local | remote
MEMORY_ENDPOINT = "MEMORY_ENDPOINT"
MEMORY_MAX_READ_SCOPE = "MEMORY_MAX_READ_SCOPE"  # session | agent | user
MEMORY_TOOLS = "MEMORY_TOOLS"  # all | read | write | none (true/false read as all/none)
MEMORY_FAILURE_MODE = "MEMORY_FAILURE_MODE"  # soft | strict
MEMORY_WRITE_AFTER_ANSWER = "MEMORY_WRITE_AFTER_ANSWER"  # true | false (soft only)
MEMORY_TOKEN_BUDGET = "MEMORY_TOKEN_BUDGET"
MEMORY_TOP_K = "MEMORY_TOP_K"
MEMORY_TIMEOUT_SECONDS = "MEMORY_TIMEOUT_SECONDS"
MEMORY_REQUIRE_PRINCIPAL = "MEMORY_REQUIRE_PRINCIPAL"
MEMORY_REQUIRE_AGENT_IDENTITY = "MEMORY_REQUIRE_AGENT_IDENTITY"

# A2A task store (the Agent's taskStore).
TASK_STORE_TYPE = "TASK_STORE_TYPE"  # memory | local | external
TASK_STORE_PATH = "TASK_STORE_PATH"  # local: the SQLite file, on the claim's mount
TASK_STORE_DSN = "TASK_STORE_DSN"  # external: from the connection Secret (secretKeyRef)
TASK_RETENTION_SECONDS = "TASK_RETENTION_SECONDS"
POD_NAME = "POD_NAME"  # downward API: who holds a task's lease
# Seconds running tasks may go on after SIGTERM: the pod's grace period less its preStop
# sleep and the margin to record their outcome.
AGENT_SHUTDOWN_GRACE_SECONDS = "AGENT_SHUTDOWN_GRACE_SECONDS"

# Autonomous mode.
AUTONOMOUS_GOAL = "AUTONOMOUS_GOAL"
AUTONOMOUS_INTERVAL_SECONDS = "AUTONOMOUS_INTERVAL_SECONDS"
AUTONOMOUS_MAX_STEPS = "AUTONOMOUS_MAX_STEPS"
AUTONOMOUS_TIMEOUT_SECONDS = "AUTONOMOUS_TIMEOUT_SECONDS"

# Webhook triggers: a JSON list of {"name", "message", "maxPerMinute"}, and the directory of
# their HMAC secrets (one file per trigger, named after it: a projected Secret's keys).
AGENT_TRIGGERS = "AGENT_TRIGGERS"
AGENT_TRIGGER_SECRETS_DIR = "AGENT_TRIGGER_SECRETS_DIR"

# Approval gates: JSON {"rules": [{"mcpServer", "tools"} | {"peer"}], "timeoutSeconds",
# "onTimeout"} (kaos_agent.approvals).
AGENT_APPROVALS = "AGENT_APPROVALS"

# The audit trail of tool calls (spec.audit): days an entry is kept, and whether the calls'
# arguments are recorded themselves (their digest always is).
AGENT_AUDIT_RETENTION_DAYS = "AGENT_AUDIT_RETENTION_DAYS"
AGENT_AUDIT_RECORD_ARGUMENTS = "AGENT_AUDIT_RECORD_ARGUMENTS"

# Token budgets per UTC day (spec.budgets), and how long the usage ledger keeps its days.
AGENT_BUDGET_TOKENS_PER_DAY = "AGENT_BUDGET_TOKENS_PER_DAY"
AGENT_BUDGET_TOKENS_PER_USER_PER_DAY = "AGENT_BUDGET_TOKENS_PER_USER_PER_DAY"
AGENT_USAGE_RETENTION_DAYS = "AGENT_USAGE_RETENTION_DAYS"

# MCP server runtime (kaos-mcp).
MCP_HOST = "MCP_HOST"
MCP_PORT = "MCP_PORT"
MCP_RUNTIME = "MCP_RUNTIME"  # python-string
MCP_TOOLS_STRING = "MCP_TOOLS_STRING"
MCP_ALLOWED_HOSTS = "MCP_ALLOWED_HOSTS"
MCP_SERVER_NAME = "MCP_SERVER_NAME"
