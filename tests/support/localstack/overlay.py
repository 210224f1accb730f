"""What a local process gets beside its desired-state function's output, and why; for a
secured stack, the pod's paths and the in-cluster API server replaced by local files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kaos_core.auth import names as auth_names
from kaos_operator.desired.memorystore import DSN_ENV

from tests.support.devissuer import ca_file as _issuer_ca
from tests.support.localstack.spec import ProcessSpec

_TOKEN_WHY = (
    "secured: kubelet's projected service-account token in the pod; locally a token the "
    "local issuer minted with the same claims"
)
_CALLERS_WHY = (
    "secured: the callers ConfigMap the operator writes, mounted in the pod; locally its "
    "data written to a file"
)
_API_WHY = (
    "secured: the pod fetches the issuer's keys through the in-cluster API server with "
    "its own token; locally unset, so they come from the local issuer's discovery document"
)
_USER_CA_WHY = (
    "verified users: a cluster's OIDC provider has a publicly trusted certificate; locally "
    "the test provider's own CA"
)
_CA_WHY = (
    "secured: the cluster's CA in the pod; locally the CA of the local issuer's HTTPS certificate"
)
_RBAC_WHY = (
    "verified users: the pod asks the API server whether RBAC lets each user invoke the agent"
    " (posture.userRbac, on by default); locally there is no API server to ask, so every"
    " verified user is served (tests/e2e/user_identity asks a real one)"
)
# The store's budget for one summarisation or extraction call (kaos_memory settings).
MODEL_TIMEOUT = "KAOS_MEMORY_MODEL_TIMEOUT"
_MODEL_TIMEOUT_WHY = (
    "real model: a pod's store gives a model call the default minute, fit for a served model;"
    " SmolLM2 on two shared CPU cores is slower, and a call abandoned at its timeout keeps"
    " Ollama busy while every retry, and the next chat, queues behind it"
)
# How long a replica's lease on a session's fold work lasts (kaos_memory settings).
LEASE_TTL = "KAOS_MEMORY_LEASE_TTL"
_LEASE_TTL_WHY = (
    "a test that kills the replica holding a lease: a pod's store keeps the default minute"
    " before another replica takes the work over; the test waits a few seconds instead"
)
# Every variable a local process gets beside its desired-state function's output, and why.
OVERLAY: dict[str, str] = {
    DSN_ENV: (
        "external store: a pod reads it from the connection Secret (secretKeyRef); "
        "locally the DSN of a fresh database on hack/postgres"
    ),
    auth_names.AGENT_MEMORY_TOKEN_FILE: _TOKEN_WHY,
    auth_names.AGENT_PEER_TOKEN_FILE: _TOKEN_WHY,
    auth_names.AGENT_MCP_TOKEN_FILE: _TOKEN_WHY,
    auth_names.AGENT_CALLERS_FILE: _CALLERS_WHY,
    auth_names.MEMORY_CALLERS_FILE: _CALLERS_WHY,
    auth_names.MCP_CALLERS_FILE: _CALLERS_WHY,
    auth_names.AGENT_AUTH_API_SERVER: _API_WHY,
    auth_names.AGENT_AUTH_CA_FILE: _CA_WHY,
    auth_names.AGENT_AUTH_TOKEN_FILE: _API_WHY,
    auth_names.MEMORY_AUTH_API_SERVER: _API_WHY,
    auth_names.MEMORY_AUTH_CA_FILE: _CA_WHY,
    auth_names.MEMORY_AUTH_TOKEN_FILE: _API_WHY,
    auth_names.MCP_AUTH_API_SERVER: _API_WHY,
    auth_names.MCP_AUTH_CA_FILE: _CA_WHY,
    auth_names.MCP_AUTH_TOKEN_FILE: _API_WHY,
    auth_names.AGENT_USER_CA_FILE: _USER_CA_WHY,
    auth_names.MEMORY_USER_CA_FILE: _USER_CA_WHY,
    auth_names.AGENT_RBAC: _RBAC_WHY,
    MODEL_TIMEOUT: _MODEL_TIMEOUT_WHY,
    LEASE_TTL: _LEASE_TTL_WHY,
}
# A secured process's API server and own token (unset locally) and the CA it trusts.
_NO_API_SERVER = {
    "Agent": (auth_names.AGENT_AUTH_API_SERVER, auth_names.AGENT_AUTH_TOKEN_FILE),
    "MemoryStore": (auth_names.MEMORY_AUTH_API_SERVER, auth_names.MEMORY_AUTH_TOKEN_FILE),
    "MCPServer": (auth_names.MCP_AUTH_API_SERVER, auth_names.MCP_AUTH_TOKEN_FILE),
}
_CA_VARIABLE = {
    "Agent": auth_names.AGENT_AUTH_CA_FILE,
    "MemoryStore": auth_names.MEMORY_AUTH_CA_FILE,
    "MCPServer": auth_names.MCP_AUTH_CA_FILE,
}
_CALLERS_VARIABLE = {
    "Agent": auth_names.AGENT_CALLERS_FILE,
    "MemoryStore": auth_names.MEMORY_CALLERS_FILE,
    "MCPServer": auth_names.MCP_CALLERS_FILE,
}
_USER_CA_VARIABLE = {
    "Agent": auth_names.AGENT_USER_CA_FILE,
    "MemoryStore": auth_names.MEMORY_USER_CA_FILE,
}


def issuer_ca_file(secure_dir: Path) -> Path:
    """The CA of the local issuer of a secured stack whose files are in ``secure_dir``."""
    return _issuer_ca(secure_dir / "issuer")


def _callers_data(objects: list[dict[str, Any]]) -> str:
    """The callers file of a resource's desired callers ConfigMap."""
    cm = next(o for o in objects if o["kind"] == "ConfigMap" and "callers" in o["metadata"]["name"])
    return str(cm["data"][auth_names.CALLERS_FILE])


def user_provider_root(secure_dir: Path) -> Path:
    """Where a secured stack with verified users keeps its OIDC provider's files."""
    return secure_dir / "oidc"


def _secured(
    spec: ProcessSpec,
    kind: str,
    objects: list[dict[str, Any]],
    secure_dir: Path,
    *,
    users: bool = False,
) -> ProcessSpec:
    """``spec`` with the pod's security variables, its pod paths and the in-cluster API
    server overlaid with local files (``OVERLAY``), and its callers file to write."""
    name = spec.key.split("/", 1)[1]
    callers = secure_dir / "callers" / f"{kind.lower()}-{name}.json"
    spec.files[str(callers)] = _callers_data(objects)
    spec.overlay.update(dict.fromkeys(_NO_API_SERVER[kind], ""))
    spec.overlay[_CA_VARIABLE[kind]] = str(issuer_ca_file(secure_dir))
    if users:
        spec.overlay[_USER_CA_VARIABLE[kind]] = str(_issuer_ca(user_provider_root(secure_dir)))
    if auth_names.AGENT_RBAC in spec.desired:
        spec.overlay[auth_names.AGENT_RBAC] = "false"
    if kind == "Agent":
        tokens = secure_dir / "tokens" / name
        spec.overlay[auth_names.AGENT_MEMORY_TOKEN_FILE] = str(tokens / "memory")
        spec.overlay[auth_names.AGENT_PEER_TOKEN_FILE] = str(tokens / "agent")
        spec.overlay[auth_names.AGENT_MCP_TOKEN_FILE] = str(tokens / "mcp")
    spec.overlay[_CALLERS_VARIABLE[kind]] = str(callers)
    return spec
