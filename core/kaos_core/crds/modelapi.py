"""The ModelAPI resource: an OpenAI-compatible model endpoint (LiteLLM proxy or Ollama)."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field

from kaos_core.crds.common import (
    AGE,
    ENDPOINT,
    LIST_MAX,
    NAME_MAX,
    PHASE,
    TEXT_MAX,
    CommonStatus,
    CRDModel,
    CustomObject,
    KindInfo,
    PrinterColumn,
    SecretKeyRef,
    Telemetry,
    cel,
    defaulted,
    image_field,
    resources_field,
    telemetry_field,
)
from kaos_core.crds.egress import EgressRule, egress_field
from kaos_core.crds.gateway import GatewayRoute, gateway_route_field
from kaos_core.crds.overrides import (
    ContainerOverride,
    EnvVar,
    PodOverride,
    container_field,
    pod_field,
)
from kaos_core.crds.storage import QUANTITY

ModelAPIMode = Literal["Proxy", "Hosted"]


class ConfigYaml(CRDModel):
    """LiteLLM's whole config file, instead of the one the operator writes from models."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "has(self.fromString) != has(self.fromSecretKeyRef)",
                "configYaml takes exactly one of fromString, fromSecretKeyRef",
            )
        )
    )

    from_string: str | None = Field(
        default=None, max_length=TEXT_MAX, description="The config file inline (YAML)."
    )
    from_secret_key_ref: SecretKeyRef | None = Field(
        default=None,
        description="A Secret key holding the config file (mounted as is; a change of the "
        "Secret rolls nothing: change the reference or restart the pods).",
    )


class ProxyConfig(CRDModel):
    """LiteLLM in front of an existing backend."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!has(self.configYaml) || (!has(self.apiBase) && !has(self.provider))",
                "configYaml replaces the generated config: apiBase and provider do not apply",
            )
        )
    )

    api_base: str | None = Field(
        default=None, max_length=2048, description="Base URL of the backend LiteLLM calls."
    )
    models: list[Annotated[str, Field(min_length=1, max_length=253)]] = Field(
        min_length=1,
        max_length=LIST_MAX,
        description="Models served, as LiteLLM names them (e.g. openai/gpt-4o-mini).",
    )
    api_key_secret_ref: SecretKeyRef | None = Field(
        default=None,
        description="Secret key holding the backend's API key (MODEL_API_KEY in the pod; "
        "a configYaml refers to it as os.environ/MODEL_API_KEY).",
    )
    provider: str | None = Field(
        default=None,
        max_length=NAME_MAX,
        pattern=r"^[a-z][a-z0-9_]*$",
        description="LiteLLM provider (openai, anthropic, ollama...) put before each model "
        "name without one: provider openai and model gpt-4o-mini call openai/gpt-4o-mini.",
    )
    config_yaml: ConfigYaml | None = Field(
        default=None, description="LiteLLM's config file, inline or from a Secret key."
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=LIST_MAX,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        description="Environment of the LiteLLM container (values or Secret/ConfigMap keys), "
        "e.g. a provider's credentials its config reads with os.environ/NAME.",
    )


# An Ollama model reference: [host[:port]/][namespace/]model[:tag]. Letters, digits and
# ``._-`` only, so a name can never carry shell syntax (it reaches the pod's script
# through the environment, never in its text, but the bound keeps it that way anywhere).
MODEL_REF = (
    r"^[A-Za-z0-9][A-Za-z0-9._-]*(:[0-9]{1,5})?(/[A-Za-z0-9][A-Za-z0-9._-]*)*"
    r"(:[A-Za-z0-9_][A-Za-z0-9._-]{0,127})?$"
)


class ModelStorage(CRDModel):
    """The claim holding Ollama's model store, so a restarted pod does not pull again."""

    size: str = Field(
        default="10Gi",
        max_length=32,
        pattern=QUANTITY,
        description="Size of the model store's volume (the model's blobs plus room for a "
        "new version of it).",
    )
    storage_class_name: str | None = Field(
        default=None,
        max_length=253,
        description="Storage class of the claim (default: the cluster's default class).",
    )


class ServerConfig(CRDModel):
    """Ollama running in the cluster, pulling its model into a volume on first start."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "!self.insecureRegistry || has(self.source)",
                "insecureRegistry applies to a source registry: Ollama's default one is HTTPS",
            )
        )
    )

    model: str = Field(
        min_length=1,
        max_length=253,
        pattern=MODEL_REF,
        description="The model's served name, e.g. smollm2:135m: what clients (Agents, "
        "MemoryStores) ask for.",
    )
    source: str | None = Field(
        default=None,
        min_length=1,
        max_length=512,
        pattern=MODEL_REF,
        description="Where the model is pulled from, when not Ollama's default registry "
        "under its served name: a reference with a registry host, e.g. "
        "models.registry.svc:5000/library/smollm2:135m (air-gapped clusters). It is "
        "copied to the served name after the pull.",
    )
    insecure_registry: bool = Field(
        default=False,
        description="Pull from source over plain HTTP (Ollama's --insecure), e.g. from a "
        "registry inside the cluster without TLS.",
    )
    context_length: int | None = Field(
        default=None,
        ge=512,
        le=1_048_576,
        description="Tokens of context Ollama gives each request (OLLAMA_CONTEXT_LENGTH). "
        "Unset: Ollama's default (4096 in the pinned version), which cuts a longer prompt "
        "from its start without an error: set at least 8192 for a model that a "
        "MemoryStore extracts facts with (the extraction prompt alone is about 7,000 "
        "tokens), and no more than the model was trained for.",
    )
    storage: ModelStorage = defaulted(ModelStorage)

    def pull_source(self) -> str:
        """What the pod pulls: the source, else the served name from Ollama's registry."""
        return self.source or self.model


class ModelAPISpec(CRDModel):
    """Desired state of a ModelAPI."""

    model_config = ConfigDict(
        json_schema_extra=cel(
            (
                "self.mode != 'Proxy' || (has(self.proxyConfig) && !has(self.serverConfig))",
                "mode Proxy requires proxyConfig and forbids serverConfig",
            ),
            (
                "self.mode != 'Hosted' || (has(self.serverConfig) && !has(self.proxyConfig))",
                "mode Hosted requires serverConfig and forbids proxyConfig",
            ),
            (
                "self.mode != 'Hosted' || !has(self.replicas) || self.replicas <= 1",
                "mode Hosted runs at most one replica: its model store is one ReadWriteOnce "
                "volume (put a Proxy ModelAPI in front of several Hosted ones to scale)",
            ),
        )
    )

    mode: ModelAPIMode = Field(description="Proxy (LiteLLM) or Hosted (Ollama).")
    proxy_config: ProxyConfig | None = Field(
        default=None,
        description="mode Proxy: LiteLLM in front of an existing backend (OpenAI, "
        "Anthropic, an Ollama elsewhere...).",
    )
    server_config: ServerConfig | None = Field(
        default=None,
        description="mode Hosted: Ollama in the cluster, serving one model it pulls on first "
        "start.",
    )
    replicas: int = Field(
        default=1,
        ge=0,
        le=100,
        description="Pods the Deployment runs (Hosted: at most 1); 0 stops the endpoint "
        "without deleting it.",
    )
    image: str | None = image_field("the chart's LiteLLM (Proxy) or Ollama (Hosted) image")
    resources: dict[str, Any] | None = resources_field()
    telemetry: Telemetry | None = telemetry_field()
    container: ContainerOverride | None = container_field()
    pod: PodOverride | None = pod_field()
    gateway_route: GatewayRoute | None = gateway_route_field()
    egress: list[EgressRule] = egress_field(
        "Proxy: its provider's API; Hosted: the registry it pulls its model from"
    )

    def served_models(self) -> list[str]:
        if self.mode == "Proxy" and self.proxy_config is not None:
            return list(self.proxy_config.models)
        if self.server_config is not None:
            return [self.server_config.model]
        return []


class ModelAPIStatus(CommonStatus):
    """Observed state of a ModelAPI."""

    models: list[str] = Field(
        default_factory=list,
        max_length=LIST_MAX,
        description="Model names the endpoint serves; an Agent without spec.model uses the first.",
    )
    model_capabilities: dict[str, list[str]] = Field(
        default_factory=dict,
        max_length=LIST_MAX,
        description="Served model name -> its capabilities as the backend reports them "
        "(completion, tools, embedding, vision, thinking...): Ollama's /api/show, LiteLLM's "
        "/model/info. Read once the Deployment is available (condition CapabilitiesRead); "
        "a model without a key is unknown.",
        json_schema_extra={
            "maxProperties": LIST_MAX,
            "additionalProperties": {
                "type": "array",
                "maxItems": 32,
                "items": {"type": "string", "maxLength": NAME_MAX},
            },
        },
    )


class ModelAPI(CustomObject):
    kind: str = "ModelAPI"
    spec: ModelAPISpec
    status: ModelAPIStatus = Field(default_factory=ModelAPIStatus)

    info: ClassVar[KindInfo] = KindInfo(
        kind="ModelAPI",
        plural="modelapis",
        singular="modelapi",
        short_names=("mapi",),
        description="An OpenAI-compatible model endpoint: a LiteLLM proxy or a hosted Ollama.",
        spec=ModelAPISpec,
        status=ModelAPIStatus,
        printer_columns=(PrinterColumn("Mode", ".spec.mode"), PHASE, ENDPOINT, AGE),
    )
