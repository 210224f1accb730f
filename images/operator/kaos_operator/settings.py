"""The operator's settings: cluster posture, default images, leader election, serving.

One environment-backed object, validated before anything starts, that hands out typed
groups (``reconcile``, ``leader``). The posture is the operator's alone: no Agent or
MemoryStore can change what it makes the memory services enforce.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import yaml
from kaos_core import __version__
from kaos_core.auth.names import (
    DEFAULT_PRINCIPAL_CLAIM,
    DEFAULT_SERVICE_ACCOUNT_ISSUER,
    DEFAULT_USER_AUDIENCE,
)
from kaos_core.crds.common import Telemetry
from kaos_core.settings import EnvSettings
from kubernetes_asyncio.config import ConfigException
from kubernetes_asyncio.config.kube_config import list_kube_config_contexts
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

log = logging.getLogger(__name__)

# Mounted into every pod with a service account: the pod's own namespace.
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

PullPolicy = Literal["Always", "IfNotPresent", "Never"]
# How memory services verify an agent's token when security is on (``names.AUTH_MODES``
# minus ``off``, which is what security off means).
TokenVerification = Literal["jwks", "tokenreview"]


def _env(name: str) -> Any:
    return {"env": name}


@dataclass(frozen=True)
class Posture:
    """The cluster's identity posture (see the memory architecture, "Posture")."""

    security_enabled: bool = False
    user_issuer: str | None = None
    # Used only with a user issuer: what user tokens must carry and where the principal is.
    user_audience: str = DEFAULT_USER_AUDIENCE
    user_principal_claim: str = DEFAULT_PRINCIPAL_CLAIM
    user_jwks_url: str | None = None
    # Used only with security on: how memory pods verify agents' service-account tokens,
    # and the issuer those tokens carry (the cluster's --service-account-issuer).
    token_verification: TokenVerification = "jwks"
    service_account_issuer: str = DEFAULT_SERVICE_ACCOUNT_ISSUER

    @property
    def user_identity(self) -> bool:
        """Secured user identity: security on and an OIDC user issuer configured."""
        return self.security_enabled and bool(self.user_issuer)

    @property
    def require_principal(self) -> bool:
        return self.user_identity

    @property
    def require_agent_identity(self) -> bool:
        return self.security_enabled


@dataclass(frozen=True)
class Images:
    """Container images of the workloads the operator creates."""

    agent: str
    mcp: str
    memory: str
    litellm: str
    ollama: str
    pull_policy: PullPolicy = "IfNotPresent"


@dataclass(frozen=True)
class GatewayRef:
    """The Gateway (Gateway API) every resource's HTTPRoute attaches to."""

    name: str
    namespace: str
    section_name: str | None = None


ParamsMode = Literal["env", "file", "args", "none"]


class McpRuntime(BaseModel):
    """One MCP runtime of the registry (the chart's ``mcpRuntimes``): how to run a server.

    ``params`` says how an MCPServer's spec.params reaches it: ``env`` (the variable
    ``paramsEnv``), ``file`` (a ConfigMap file at ``paramsPath``), ``args`` (appended to
    args, one per line) or ``none``.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")

    image: str = Field(min_length=1, max_length=512)
    command: list[str] | None = None
    args: list[str] = Field(default_factory=list)
    port: int = Field(default=8000, ge=1, le=65535)
    path: str = Field(default="/mcp", pattern=r"^/")
    params: ParamsMode = "env"
    params_env: str = Field(default="MCP_PARAMS", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    params_path: str = Field(default="/etc/mcp/params", pattern=r"^/.+/[^/]+$")
    env: dict[str, str] = Field(default_factory=dict)


# Runtimes the operator knows without the registry (an MCPServer's spec.runtime).
BUILTIN_RUNTIMES = ("python-string", "custom")


@dataclass(frozen=True)
class ReconcileSettings:
    """What reconcilers read: the images they deploy and the posture they enforce."""

    images: Images
    posture: Posture
    # The tracing default of every pod (the chart's ``telemetry`` values).
    telemetry: Telemetry = field(default_factory=Telemetry)
    # Gateway API on (the chart's ``gatewayAPI``): the Gateway routes attach to.
    gateway: GatewayRef | None = None
    # The MCP runtime registry (the chart's ``mcpRuntimes``), by name.
    mcp_runtimes: Mapping[str, McpRuntime] = field(default_factory=dict)


@dataclass(frozen=True)
class LeaderSettings:
    """Lease-based leader election (client-go's defaults, scaled by the same ratios)."""

    enabled: bool
    namespace: str
    lease_name: str
    identity: str
    lease_duration: float
    renew_deadline: float
    retry_period: float


_IMAGE_REPO = "ghcr.io/kaos-tools"


class OperatorSettings(EnvSettings):
    """Every setting of the operator process."""

    env_prefix: ClassVar[str] = "KAOS_OPERATOR_"

    security_enabled: bool = Field(default=False, json_schema_extra=_env("KAOS_SECURITY_ENABLED"))
    user_issuer: str | None = Field(default=None, json_schema_extra=_env("KAOS_USER_ISSUER"))
    user_audience: str = Field(
        default=DEFAULT_USER_AUDIENCE,
        min_length=1,
        description="With a user issuer: the audience end users' tokens must carry.",
        json_schema_extra=_env("KAOS_USER_AUDIENCE"),
    )
    user_principal_claim: str = Field(
        default=DEFAULT_PRINCIPAL_CLAIM,
        min_length=1,
        description="With a user issuer: the claim of a user token that names the principal.",
        json_schema_extra=_env("KAOS_USER_PRINCIPAL_CLAIM"),
    )
    user_jwks_url: str | None = Field(
        default=None,
        description="With a user issuer: its key set URL, instead of OIDC discovery.",
        json_schema_extra=_env("KAOS_USER_JWKS_URL"),
    )
    token_verification: TokenVerification = Field(
        default="jwks",
        description="With security on: how MemoryStore pods verify agents' service-account "
        "tokens, offline against the issuer's keys (jwks) or by asking the API server "
        "(tokenreview: the memory pods' ServiceAccount needs create on tokenreviews).",
        json_schema_extra=_env("KAOS_TOKEN_VERIFICATION"),
    )
    service_account_issuer: str = Field(
        default=DEFAULT_SERVICE_ACCOUNT_ISSUER,
        min_length=1,
        description="The cluster's service-account issuer (its --service-account-issuer), "
        "the `iss` of the agents' projected tokens.",
        json_schema_extra=_env("KAOS_SERVICE_ACCOUNT_ISSUER"),
    )

    image_agent: str = Field(
        default=f"{_IMAGE_REPO}/kaos-agent:{__version__}",
        json_schema_extra=_env("KAOS_IMAGE_AGENT"),
    )
    image_mcp: str = Field(
        default=f"{_IMAGE_REPO}/kaos-agent:{__version__}", json_schema_extra=_env("KAOS_IMAGE_MCP")
    )
    image_memory: str = Field(
        default=f"{_IMAGE_REPO}/kaos-memory:{__version__}",
        json_schema_extra=_env("KAOS_IMAGE_MEMORY"),
    )
    image_litellm: str = Field(
        default="ghcr.io/berriai/litellm:main-stable", json_schema_extra=_env("KAOS_IMAGE_LITELLM")
    )
    image_ollama: str = Field(
        # Pinned: a Hosted ModelAPI's script and probes use this version's CLI.
        default="docker.io/ollama/ollama:0.17.4",
        json_schema_extra=_env("KAOS_IMAGE_OLLAMA"),
    )
    image_pull_policy: PullPolicy = Field(
        default="IfNotPresent", json_schema_extra=_env("KAOS_IMAGE_PULL_POLICY")
    )

    telemetry_endpoint: str | None = Field(
        default=None,
        pattern=r"^https?://\S+$",
        description="OTLP/HTTP receiver every pod the operator makes exports spans to, unless "
        "its resource's spec.telemetry says otherwise; unset: tracing off by default.",
        json_schema_extra=_env("KAOS_TELEMETRY_ENDPOINT"),
    )
    telemetry_sampling_ratio: float = Field(
        default=1.0,
        ge=0,
        le=1,
        description="Default share of traces kept (0 to 1).",
        json_schema_extra=_env("KAOS_TELEMETRY_SAMPLING_RATIO"),
    )
    telemetry_capture_content: bool = Field(
        default=False,
        description="Default of content capture on spans (prompts, memory queries): personal data.",
        json_schema_extra=_env("KAOS_TELEMETRY_CAPTURE_CONTENT"),
    )

    gateway_api_enabled: bool = Field(
        default=False,
        description="Make an HTTPRoute for each Agent, ModelAPI and MCPServer with "
        "spec.gatewayRoute (needs the Gateway API CRDs).",
        json_schema_extra=_env("KAOS_GATEWAY_API_ENABLED"),
    )
    gateway_name: str = Field(
        default="",
        pattern=r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="With Gateway API on: the Gateway the routes attach to.",
        json_schema_extra=_env("KAOS_GATEWAY_NAME"),
    )
    gateway_namespace: str = Field(
        default="",
        pattern=r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="The Gateway's namespace; empty: each resource's own.",
        json_schema_extra=_env("KAOS_GATEWAY_NAMESPACE"),
    )
    gateway_section_name: str = Field(
        default="",
        description="The Gateway listener the routes attach to; empty: every listener.",
        json_schema_extra=_env("KAOS_GATEWAY_SECTION_NAME"),
    )
    mcp_runtimes: str = Field(
        default="{}",
        description="The MCP runtime registry as JSON: name -> runtime (image, command, args, "
        "port, path, params, paramsEnv, paramsPath, env).",
        json_schema_extra=_env("KAOS_MCP_RUNTIMES"),
    )

    kubeconfig: str | None = Field(default=None, json_schema_extra=_env("KUBECONFIG"))
    watch_namespace: str | None = Field(
        default=None, description="Watch only this namespace (default: all namespaces)."
    )
    namespace: str | None = Field(
        default=None,
        description="Namespace of the leader Lease (default: the operator's own, see "
        "``lease_namespace``).",
    )
    host: str = "0.0.0.0"
    port: int = Field(default=8081, ge=0, le=65535)
    log_level: str = "INFO"
    workers: int = Field(default=4, ge=1, le=64)
    backoff_base: float = Field(default=0.5, gt=0)
    backoff_max: float = Field(default=60.0, gt=0)

    leader_election: bool = True
    lease_name: str = "kaos-operator"
    identity: str | None = None
    lease_duration: float = Field(default=15.0, gt=0)
    renew_deadline: float = Field(default=10.0, gt=0)
    retry_period: float = Field(default=2.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> OperatorSettings:
        if not self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "need KAOS_OPERATOR_RETRY_PERIOD < KAOS_OPERATOR_RENEW_DEADLINE < "
                "KAOS_OPERATOR_LEASE_DURATION"
            )
        if self.gateway_api_enabled and not self.gateway_name:
            raise ValueError("KAOS_GATEWAY_API_ENABLED needs KAOS_GATEWAY_NAME")
        self.runtimes()  # a bad registry stops the operator at start, naming the entry
        return self

    def runtimes(self) -> dict[str, McpRuntime]:
        try:
            raw = json.loads(self.mcp_runtimes or "{}")
        except ValueError:
            raise ValueError("KAOS_MCP_RUNTIMES is not JSON") from None
        if not isinstance(raw, dict):
            raise ValueError("KAOS_MCP_RUNTIMES must map runtime names to runtimes")
        out = {}
        for name, entry in raw.items():
            if name in BUILTIN_RUNTIMES:
                raise ValueError(f"KAOS_MCP_RUNTIMES: {name} is a built-in runtime")
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) or len(name) > 63:
                raise ValueError(f"KAOS_MCP_RUNTIMES: {name!r} is not a runtime name")
            try:
                out[name] = McpRuntime.model_validate(entry)
            except ValidationError as exc:
                first = exc.errors(include_url=False, include_input=False)[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ValueError(f"KAOS_MCP_RUNTIMES: {name}.{where}: {first['msg']}") from None
        return out

    @property
    def gateway(self) -> GatewayRef | None:
        if not self.gateway_api_enabled:
            return None
        return GatewayRef(
            name=self.gateway_name,
            namespace=self.gateway_namespace,
            section_name=self.gateway_section_name or None,
        )

    @property
    def posture(self) -> Posture:
        return Posture(
            security_enabled=self.security_enabled,
            user_issuer=self.user_issuer,
            user_audience=self.user_audience,
            user_principal_claim=self.user_principal_claim,
            user_jwks_url=self.user_jwks_url or None,
            token_verification=self.token_verification,
            service_account_issuer=self.service_account_issuer,
        )

    @property
    def images(self) -> Images:
        return Images(
            agent=self.image_agent,
            mcp=self.image_mcp,
            memory=self.image_memory,
            litellm=self.image_litellm,
            ollama=self.image_ollama,
            pull_policy=self.image_pull_policy,
        )

    @property
    def telemetry(self) -> Telemetry:
        return Telemetry(
            endpoint=self.telemetry_endpoint,
            sampling_ratio=self.telemetry_sampling_ratio,
            capture_content=self.telemetry_capture_content,
        )

    @property
    def reconcile(self) -> ReconcileSettings:
        return ReconcileSettings(
            images=self.images,
            posture=self.posture,
            telemetry=self.telemetry,
            gateway=self.gateway,
            mcp_runtimes=self.runtimes(),
        )

    @property
    def leader(self) -> LeaderSettings:
        identity = self.identity or f"{socket.gethostname()}-{os.getpid()}"
        return LeaderSettings(
            enabled=self.leader_election,
            namespace=self.namespace or lease_namespace(self.kubeconfig),
            lease_name=self.lease_name,
            identity=identity,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )


def lease_namespace(
    kubeconfig: str | None,
    *,
    environ: Mapping[str, str] = os.environ,
    service_account_namespace: Path = SERVICE_ACCOUNT_NAMESPACE,
) -> str:
    """The operator's own namespace, where its Lease lives unless a setting names one.

    In a pod: ``POD_NAMESPACE`` (the downward API) or the service account's namespace
    file, unless a kubeconfig was given explicitly. Outside: the namespace of the
    kubeconfig's current context, else ``default`` (as kubectl resolves it). A fixed
    default such as ``kaos-system`` would leave an operator on a cluster without that
    namespace unable to ever create its Lease.
    """
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    if not kubeconfig:
        try:
            own = service_account_namespace.read_text().strip()
        except OSError:
            own = ""
        if own:
            return own
    try:
        _, current = list_kube_config_contexts(kubeconfig)
    except (ConfigException, OSError, ValueError, yaml.YAMLError) as exc:
        # Connecting with the same file reports its problem loudly; here it only means
        # there is no context namespace to take.
        log.debug("no kubeconfig context to take a namespace from", extra={"error": str(exc)})
        return "default"
    namespace = ((current or {}).get("context") or {}).get("namespace")
    return str(namespace) if namespace else "default"
