"""The names every side of verified agent identity shares (issue 13).

Each Agent pod runs as its own ServiceAccount and gets two projected, audience-bound,
short-lived tokens (kubelet rotates them): one for memory services, one for peer agents.
Separate audiences mean a service that receives a token cannot replay it against the
other kind of service. A caller sends its token in ``AGENT_TOKEN_HEADER``; the
``Authorization`` header stays free for the end user's own token (issue 14).
"""

from __future__ import annotations

# Audiences of the projected service-account tokens.
MEMORY_AUDIENCE = "kaos.dev/memory"
AGENT_AUDIENCE = "kaos.dev/agent"

# The request header that carries the calling agent's service-account token.
AGENT_TOKEN_HEADER = "X-Agent-Token"

# Where the operator mounts the projected tokens in an Agent pod, and for how long
# kubelet makes them valid (it rotates them at 80% of that).
TOKEN_DIR = "/var/run/secrets/kaos"
MEMORY_TOKEN_PATH = f"{TOKEN_DIR}/memory/token"
AGENT_TOKEN_PATH = f"{TOKEN_DIR}/agent/token"
TOKEN_EXPIRATION_SECONDS = 3600

# Where the operator mounts a service's callers file (a ConfigMap it keeps current, so a
# grant or a revocation reaches the pod without a restart).
CALLERS_DIR = "/etc/kaos/callers"
CALLERS_FILE = "callers.json"
CALLERS_PATH = f"{CALLERS_DIR}/{CALLERS_FILE}"

# Agent pod: the token files it presents (read on every use: kubelet rotates them).
AGENT_MEMORY_TOKEN_FILE = "AGENT_MEMORY_TOKEN_FILE"
AGENT_PEER_TOKEN_FILE = "AGENT_PEER_TOKEN_FILE"
# Agent pod: the agents allowed to delegate to it (a callers file) when security is on.
AGENT_CALLERS_FILE = "AGENT_CALLERS_FILE"

# Memory service: the agents bound to the store (a callers file) when security is on.
MEMORY_CALLERS_FILE = "KAOS_MEMORY_CALLERS_FILE"

# Both services: how a presented token is verified. ``off`` keeps the trusted-header
# mode; ``jwks`` verifies offline against the cluster's service-account issuer (its
# discovery document and keys); ``tokenreview`` asks the API server each time (cached).
AUTH_MODES = ("off", "jwks", "tokenreview")
