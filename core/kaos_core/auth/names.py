"""The names every side of verified agent identity shares.

Each Agent pod runs as its own ServiceAccount and gets two projected, audience-bound,
short-lived tokens (kubelet rotates them): one for memory services, one for peer agents.
Separate audiences mean a service that receives a token cannot replay it against the
other kind of service. A caller sends its token in ``X-Agent-Token``; the
``Authorization`` header stays free for the end user's own token. The headers themselves
are named in ``kaos_core.wire``.
"""

from __future__ import annotations

# Audiences of the projected service-account tokens.
MEMORY_AUDIENCE = "kaos.dev/memory"
AGENT_AUDIENCE = "kaos.dev/agent"
MCP_AUDIENCE = "kaos.dev/mcp"

# Where the operator mounts the projected tokens in an Agent pod, and for how long
# kubelet makes them valid (it rotates them at 80% of that).
TOKEN_DIR = "/var/run/secrets/kaos"
MEMORY_TOKEN_PATH = f"{TOKEN_DIR}/memory/token"
AGENT_TOKEN_PATH = f"{TOKEN_DIR}/agent/token"
MCP_TOKEN_PATH = f"{TOKEN_DIR}/mcp/token"
TOKEN_EXPIRATION_SECONDS = 3600

# Where the operator mounts a service's callers file (a ConfigMap it keeps current, so a
# grant or a revocation reaches the pod without a restart).
CALLERS_DIR = "/etc/kaos/callers"
CALLERS_FILE = "callers.json"
CALLERS_PATH = f"{CALLERS_DIR}/{CALLERS_FILE}"

# Agent pod: the token files it presents (read on every use: kubelet rotates them).
AGENT_MEMORY_TOKEN_FILE = "AGENT_MEMORY_TOKEN_FILE"
AGENT_PEER_TOKEN_FILE = "AGENT_PEER_TOKEN_FILE"
AGENT_MCP_TOKEN_FILE = "AGENT_MCP_TOKEN_FILE"
# Agent pod: the agents allowed to delegate to it (a callers file) when security is on.
AGENT_CALLERS_FILE = "AGENT_CALLERS_FILE"

# Memory service: the agents bound to the store (a callers file) when security is on.
MEMORY_CALLERS_FILE = "KAOS_MEMORY_CALLERS_FILE"

# Both services: how a presented token is verified. ``off`` keeps the trusted-header
# mode; ``jwks`` verifies offline against the cluster's service-account issuer (its
# discovery document and keys); ``tokenreview`` asks the API server each time (cached).
AUTH_MODES = ("off", "jwks", "tokenreview")

# Memory service: how it verifies agents' tokens when security is on (the operator sets
# these in every MemoryStore pod). The mode is one of ``AUTH_MODES``; the issuer is the
# cluster's service-account issuer (``jwks`` fetches its discovery document and keys from
# the API server); the API server, CA and token file are the in-cluster ones the pod
# uses for that fetch (``jwks``) or for TokenReview requests (``tokenreview``).
MEMORY_AUTH_MODE = "KAOS_MEMORY_AUTH_MODE"
MEMORY_AUTH_ISSUER = "KAOS_MEMORY_AUTH_ISSUER"
MEMORY_AUTH_API_SERVER = "KAOS_MEMORY_AUTH_API_SERVER"
MEMORY_AUTH_CA_FILE = "KAOS_MEMORY_AUTH_CA_FILE"
MEMORY_AUTH_TOKEN_FILE = "KAOS_MEMORY_AUTH_TOKEN_FILE"

# Memory service: its own MemoryStore, the object admin calls are authorised on (a
# SubjectAccessReview of ``get``/``delete`` on ``memorystores/data``; ``kaos_memory.admin``).
MEMORY_STORE_NAMESPACE = "KAOS_MEMORY_STORE_NAMESPACE"
MEMORY_STORE_NAME = "KAOS_MEMORY_STORE_NAME"

# The in-cluster API server as a pod reaches it, and the pod's own service-account
# credentials (the default token mount, which memory pods keep).
IN_CLUSTER_API_SERVER = "https://kubernetes.default.svc"
IN_CLUSTER_CA_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
IN_CLUSTER_TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# The issuer of a cluster that sets no --service-account-issuer of its own.
DEFAULT_SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"

# Agent: how it verifies the token of an agent delegating to it (audience
# ``AGENT_AUDIENCE``) when security is on; the same modes and meanings as the memory
# service's. Set by the operator in every Agent pod from the posture.
AGENT_AUTH_MODE = "AGENT_AUTH_MODE"
AGENT_AUTH_ISSUER = "AGENT_AUTH_ISSUER"
AGENT_AUTH_JWKS_URL = "AGENT_AUTH_JWKS_URL"
AGENT_AUTH_API_SERVER = "AGENT_AUTH_API_SERVER"
AGENT_AUTH_CA_FILE = "AGENT_AUTH_CA_FILE"
AGENT_AUTH_TOKEN_FILE = "AGENT_AUTH_TOKEN_FILE"
AGENT_AUTH_LEEWAY = "AGENT_AUTH_LEEWAY"
AGENT_AUTH_REVIEW_CACHE_SECONDS = "AGENT_AUTH_REVIEW_CACHE_SECONDS"

# Agent pod: its API-server credentials for that verification (an Agent pod has no
# automounted token). A third source of the projected token volume: a token with the API
# server's own audience, and the cluster CA from the ``kube-root-ca.crt`` ConfigMap every
# namespace has.
API_TOKEN_PATH = f"{TOKEN_DIR}/api/token"
API_CA_PATH = f"{TOKEN_DIR}/api/ca.crt"
KUBE_ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"

# -- Verified user identity ---------------------------------------------------------------
#
# With a user issuer configured (the chart's ``posture.userIssuer``; needs security on) the
# principal is no longer a header anyone may set: an end user's client (a gateway) sends
# the user's OIDC token as ``Authorization: Bearer`` to an agent, the agent verifies it and
# takes the principal from one claim, and forwards the same token to the memory service
# and to the agents it delegates to in ``X-User-Token`` (beside its own ``X-Agent-Token``;
# both named in ``kaos_core.wire``), where it is verified again. ``X-Principal`` sent by a
# client is refused under this posture.
# The claim that names the principal, and the audience user tokens carry, when the
# posture names none.
DEFAULT_PRINCIPAL_CLAIM = "sub"
DEFAULT_USER_AUDIENCE = "kaos"

# Agent: how it verifies end users' tokens (set by the operator from the posture).
AGENT_USER_ISSUER = "AGENT_USER_ISSUER"
AGENT_USER_AUDIENCE = "AGENT_USER_AUDIENCE"
AGENT_USER_PRINCIPAL_CLAIM = "AGENT_USER_PRINCIPAL_CLAIM"
AGENT_USER_JWKS_URL = "AGENT_USER_JWKS_URL"
AGENT_USER_AUTHORIZED_PARTY = "AGENT_USER_AUTHORIZED_PARTY"
AGENT_USER_CA_FILE = "AGENT_USER_CA_FILE"
AGENT_USER_LEEWAY = "AGENT_USER_LEEWAY"
# Agent: who may talk to it, asked of Kubernetes RBAC (``kaos_core.auth.invoke``): on or
# off, and where a user token's Kubernetes user and groups are.
AGENT_RBAC = "AGENT_RBAC"
AGENT_RBAC_USERNAME_CLAIM = "AGENT_RBAC_USERNAME_CLAIM"
AGENT_RBAC_USERNAME_PREFIX = "AGENT_RBAC_USERNAME_PREFIX"
AGENT_RBAC_GROUPS_CLAIM = "AGENT_RBAC_GROUPS_CLAIM"
AGENT_RBAC_GROUPS_PREFIX = "AGENT_RBAC_GROUPS_PREFIX"
AGENT_RBAC_CACHE_SECONDS = "AGENT_RBAC_CACHE_SECONDS"

# Memory service: the same, for the user tokens agents forward.
MEMORY_USER_ISSUER = "KAOS_MEMORY_USER_ISSUER"
MEMORY_USER_AUDIENCE = "KAOS_MEMORY_USER_AUDIENCE"
MEMORY_USER_PRINCIPAL_CLAIM = "KAOS_MEMORY_USER_PRINCIPAL_CLAIM"
MEMORY_USER_JWKS_URL = "KAOS_MEMORY_USER_JWKS_URL"
MEMORY_USER_AUTHORIZED_PARTY = "KAOS_MEMORY_USER_AUTHORIZED_PARTY"
MEMORY_USER_CA_FILE = "KAOS_MEMORY_USER_CA_FILE"
MEMORY_USER_LEEWAY = "KAOS_MEMORY_USER_LEEWAY"

# -- MCP servers verify their callers ------------------------------------------------------
#
# With security on, the operator runs ``kaos-mcp`` with the same verification as the memory
# service (the ``CallerAuth`` group under the prefix ``MCP_``): an agent presents its token of
# audience ``MCP_AUDIENCE`` in ``X-Agent-Token``, and only the Agents that list the MCPServer
# in ``mcpServers`` (its callers file) may call tools. The operator's own ServiceAccount
# (``namespace/name``) may list the tools (``status.availableTools``) and nothing else.
MCP_AUTH_MODE = "MCP_AUTH_MODE"
MCP_AUTH_ISSUER = "MCP_AUTH_ISSUER"
MCP_AUTH_API_SERVER = "MCP_AUTH_API_SERVER"
MCP_AUTH_CA_FILE = "MCP_AUTH_CA_FILE"
MCP_AUTH_TOKEN_FILE = "MCP_AUTH_TOKEN_FILE"
MCP_CALLERS_FILE = "MCP_CALLERS_FILE"
MCP_AUTH_LISTER = "MCP_AUTH_LISTER"
