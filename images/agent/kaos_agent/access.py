"""Who may talk to this agent (``AGENT_RBAC``): its question to Kubernetes RBAC.

The decision itself is ``kaos_core.auth.invoke``'s (a SubjectAccessReview of ``create``
on ``agents/invoke`` of this Agent, cached briefly); ``kaos_agent.auth`` asks it for every
verified user, the end user's and the one a delegation carries, before a run starts.
This module builds it from the agent's settings: the API server and credentials of
verified agent identity (``AGENT_AUTH_API_SERVER``, ``_CA_FILE``, ``_TOKEN_FILE``, the
pod's projected API token under the secured posture), the Agent's namespace and name
from ``AGENT_IDENTITY``.
"""

from __future__ import annotations

from kaos_core.auth.access import KubernetesAccess
from kaos_core.auth.invoke import InvokeAccess
from kaos_core.auth.verify import HttpsSource
from kaos_core.wire import AGENT_IDENTITY_RE

from kaos_agent.settings import AgentSettings


def invoke_access(settings: AgentSettings) -> InvokeAccess | None:
    """The RBAC check of this agent; ``None`` when ``AGENT_RBAC`` is off. Dials
    nothing (the API server is first asked on the first user's request)."""
    rbac = settings.user_rbac
    callers = settings.callers
    if not rbac.enabled or callers.api_server is None or settings.agent.identity is None:
        return None
    # Validated at load (``AgentIdentity``): ``kaos://agent/<namespace>/<name>``.
    match = AGENT_IDENTITY_RE.fullmatch(settings.agent.identity)
    assert match is not None
    access = KubernetesAccess(
        HttpsSource(ca_file=callers.ca_file, token_file=callers.token_file),
        callers.api_server,
        cache_seconds=rbac.cache_seconds,
    )
    return InvokeAccess(access, rbac.mapping(), namespace=match["ns"], name=match["name"])
