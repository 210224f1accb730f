"""What security on adds to a ``kaos-mcp`` pod: it verifies its callers.

The runtime (``kaos_agent.mcp_runtime.auth``) verifies the ``kaos.dev/mcp`` token each
agent presents, as the memory service verifies its own: the posture's mode and issuer,
through the in-cluster API server with a projected API token of the pod's ServiceAccount
and the cluster CA (the same paths as an Agent pod's, ``security.token_volume``), and the
callers file the operator keeps current (the Agents that list the MCPServer). The
operator's own ServiceAccount may list the tools and call none. Other runtimes (custom,
registered) run someone else's server: they get the NetworkPolicy only.
"""

from __future__ import annotations

from kaos_core.auth import names as auth

from kaos_operator.desired.common import Obj
from kaos_operator.desired.security import TOKENS_VOLUME
from kaos_operator.settings import Posture


def mcp_security_env(posture: Posture) -> dict[str, str]:
    env = {
        auth.MCP_AUTH_MODE: posture.token_verification,
        auth.MCP_AUTH_ISSUER: posture.service_account_issuer,
        auth.MCP_AUTH_API_SERVER: auth.IN_CLUSTER_API_SERVER,
        auth.MCP_AUTH_CA_FILE: auth.API_CA_PATH,
        auth.MCP_AUTH_TOKEN_FILE: auth.API_TOKEN_PATH,
        auth.MCP_CALLERS_FILE: auth.CALLERS_PATH,
    }
    if posture.operator_service_account is not None:
        env[auth.MCP_AUTH_LISTER] = posture.operator_service_account
    return env


def api_token_volume() -> Obj:
    """The pod's API-server token (for the issuer's keys or TokenReviews) and the cluster
    CA, rotated by kubelet; the pod's ServiceAccount gains no right by it."""
    prefix = auth.TOKEN_DIR + "/"
    return {
        "name": TOKENS_VOLUME,
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "path": auth.API_TOKEN_PATH.removeprefix(prefix),
                        "expirationSeconds": auth.TOKEN_EXPIRATION_SECONDS,
                    }
                },
                {
                    "configMap": {
                        "name": auth.KUBE_ROOT_CA_CONFIG_MAP,
                        "items": [{"key": "ca.crt", "path": auth.API_CA_PATH.removeprefix(prefix)}],
                    }
                },
            ]
        },
    }
