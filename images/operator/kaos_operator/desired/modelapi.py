"""A ModelAPI's desired objects: LiteLLM with its ConfigMap (Proxy) or Ollama (Hosted)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import yaml
from kaos_core.crds import reasons
from kaos_core.crds.common import Telemetry
from kaos_core.crds.modelapi import ModelAPI

from kaos_operator.desired import security
from kaos_operator.desired.common import (
    LITELLM_PORT,
    OLLAMA_PORT,
    Obj,
    container,
    deployment,
    env_list,
    http_probe,
    metadata,
    service,
    service_url,
)
from kaos_operator.desired.gateway import route_objects
from kaos_operator.desired.overrides import (
    TELEMETRY_PREFIX,
    SpecRefused,
    reserved_prefixes,
    with_overrides,
)
from kaos_operator.desired.telemetry import litellm_telemetry_env, telemetry_env
from kaos_operator.settings import GatewayRef, Images, Posture

LITELLM_CONFIG_DIR = "/etc/litellm"
API_KEY_ENV = "MODEL_API_KEY"
CONFIG_HASH_ANNOTATION = "kaos.tools/config-hash"
# The key (set or not: spec.proxyConfig.apiKeySecretRef is where it comes from), Ollama's
# address and model, and tracing are the operator's.
RESERVED_ENV = reserved_prefixes(
    TELEMETRY_PREFIX, names=frozenset({API_KEY_ENV, "OLLAMA_HOST", "OLLAMA_MODEL"})
)

# Serve first, pull once the server answers, then keep serving: the pod comes up with
# the model pulled into its volume without an init container holding a second server.
OLLAMA_SCRIPT = (
    "ollama serve & pid=$!; until ollama list >/dev/null 2>&1; do sleep 1; done; "
    'ollama pull "$OLLAMA_MODEL" || exit 1; wait $pid'
)


@dataclass(frozen=True)
class ModelAPIContext:
    images: Images
    posture: Posture = field(default_factory=Posture)
    # With security on: who calls it (``security.agents_using_model_api`` and
    # ``security.stores_using_model_api``).
    agent_clients: tuple[str, ...] = ()
    store_clients: tuple[str, ...] = ()
    # The chart's tracing default; the resource's spec.telemetry overrides it field by field.
    telemetry: Telemetry = field(default_factory=Telemetry)
    # Gateway API on: the Gateway spec.gatewayRoute attaches to.
    gateway: GatewayRef | None = None


def model_api_port(api: ModelAPI) -> int:
    return LITELLM_PORT if api.spec.mode == "Proxy" else OLLAMA_PORT


def model_api_endpoint(api: ModelAPI) -> str:
    """Base URL of the OpenAI-compatible API (clients add ``/v1``)."""
    return service_url(api.name, api.namespace, model_api_port(api))


def config_map_name(api: ModelAPI) -> str:
    return f"{api.name}-litellm"


def litellm_config(api: ModelAPI, *, traced: bool = False) -> dict[str, Any]:
    proxy = api.spec.proxy_config
    if proxy is None:
        raise ValueError(f"ModelAPI {api.name}: mode Proxy without proxyConfig")
    entries = []
    for model in proxy.models:
        # The provider prefixes a bare name: LiteLLM routes on the prefix.
        routed = f"{proxy.provider}/{model}" if proxy.provider and "/" not in model else model
        params: dict[str, Any] = {"model": routed}
        if proxy.api_base:
            params["api_base"] = proxy.api_base
            # An OpenAI-compatible backend of a name LiteLLM does not know: without this it
            # refuses embeddings with `dimensions` (only text-embedding-3 may take it).
            params["allowed_openai_params"] = ["dimensions"]
        if proxy.api_key_secret_ref is not None:
            params["api_key"] = f"os.environ/{API_KEY_ENV}"
        elif proxy.api_base:
            # A backend without a key (a local server): LiteLLM's OpenAI client sends no
            # request without one ("Missing credentials"); such a backend ignores it.
            params["api_key"] = "none"
        entries.append({"model_name": model, "litellm_params": params})
    config: dict[str, Any] = {"model_list": entries}
    if proxy.config_yaml is not None and proxy.config_yaml.from_string is not None:
        config = _inline_config(proxy.config_yaml.from_string)
    if traced:
        # LiteLLM's OpenTelemetry callback: a span per proxied call, in the caller's trace.
        settings = dict(config.get("litellm_settings") or {})
        callbacks = list(settings.get("callbacks") or [])
        settings["callbacks"] = [*callbacks, *(["otel"] if "otel" not in callbacks else [])]
        config["litellm_settings"] = settings
    return config


def _inline_config(text: str) -> dict[str, Any]:
    """The user's LiteLLM config, refused unless it is a YAML mapping."""
    where = "spec.proxyConfig.configYaml.fromString"
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        raise SpecRefused(reasons.INVALID_SPEC, [f"{where}: not valid YAML{line}"]) from None
    if not isinstance(config, dict):
        raise SpecRefused(reasons.INVALID_SPEC, [f"{where}: not a YAML mapping"])
    return config


def _proxy_objects(api: ModelAPI, ctx: ModelAPIContext) -> list[Obj]:
    spec = api.spec
    proxy = spec.proxy_config
    if proxy is None:
        raise ValueError(f"ModelAPI {api.name}: mode Proxy without proxyConfig")
    otel_env = telemetry_env(api, spec.telemetry, ctx.telemetry)
    secret_config = proxy.config_yaml.from_secret_key_ref if proxy.config_yaml else None
    objects: list[Obj] = []
    if secret_config is None:
        text = yaml.safe_dump(litellm_config(api, traced=bool(otel_env)), sort_keys=True)
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata(api, config_map_name(api)),
                "data": {"config.yaml": text},
            }
        )
        config_volume: Obj = {"name": "config", "configMap": {"name": config_map_name(api)}}
    else:
        # The operator cannot read Secrets: the key is mounted as the config file itself.
        text = f"secret:{secret_config.name}/{secret_config.key}"
        config_volume = {
            "name": "config",
            "secret": {
                "secretName": secret_config.name,
                "items": [{"key": secret_config.key, "path": "config.yaml"}],
            },
        }
    env: list[Obj] = []
    ref = proxy.api_key_secret_ref
    if ref is not None:
        env.append(
            {"name": API_KEY_ENV, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}
        )
    env += env_list({**otel_env, **litellm_telemetry_env(otel_env)})
    main = container(
        "litellm",
        spec.image or ctx.images.litellm,
        ctx.images.pull_policy,
        port=LITELLM_PORT,
        args=["--config", f"{LITELLM_CONFIG_DIR}/config.yaml", "--port", str(LITELLM_PORT)],
        env=env,
        resources=spec.resources,
        readiness=http_probe("/health/readiness"),
        liveness=http_probe("/health/liveliness"),
        volume_mounts=[{"name": "config", "mountPath": LITELLM_CONFIG_DIR, "readOnly": True}],
    )
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    dep = deployment(
        api,
        container=main,
        replicas=spec.replicas,
        volumes=[config_volume],
        # A config change rolls the pods: LiteLLM reads its config once at start.
        pod_annotations={CONFIG_HASH_ANNOTATION: digest},
    )
    dep = with_overrides(
        dep, spec, extra_env=("spec.proxyConfig.env", proxy.env), reserved=RESERVED_ENV
    )
    return [*objects, dep, service(api, LITELLM_PORT)]


def _hosted_objects(api: ModelAPI, ctx: ModelAPIContext) -> list[Obj]:
    spec = api.spec
    if spec.server_config is None:
        raise ValueError(f"ModelAPI {api.name}: mode Hosted without serverConfig")
    model = spec.server_config.model
    main = container(
        "ollama",
        spec.image or ctx.images.ollama,
        ctx.images.pull_policy,
        port=OLLAMA_PORT,
        command=["/bin/sh", "-c", OLLAMA_SCRIPT],
        # Ollama exports no spans; a hosted ModelAPI's calls are traced by their callers.
        env=env_list({"OLLAMA_HOST": f"0.0.0.0:{OLLAMA_PORT}", "OLLAMA_MODEL": model}),
        resources=spec.resources,
        # Ready only once the model is pulled, not merely when the server answers.
        readiness={
            "exec": {"command": ["/bin/sh", "-c", 'ollama show "$OLLAMA_MODEL" >/dev/null']},
            "periodSeconds": 10,
        },
        liveness=http_probe("/"),
        volume_mounts=[{"name": "models", "mountPath": "/root/.ollama"}],
    )
    dep = deployment(
        api, container=main, replicas=spec.replicas, volumes=[{"name": "models", "emptyDir": {}}]
    )
    return [with_overrides(dep, spec, reserved=RESERVED_ENV), service(api, OLLAMA_PORT)]


def desired_modelapi_objects(api: ModelAPI, ctx: ModelAPIContext) -> list[Obj]:
    objects = _proxy_objects(api, ctx) if api.spec.mode == "Proxy" else _hosted_objects(api, ctx)
    objects += route_objects(api, model_api_port(api), api.spec.gateway_route, ctx.gateway)
    if ctx.posture.security_enabled:
        sources = {"Agent": ctx.agent_clients, "MemoryStore": ctx.store_clients}
        objects.append(security.network_policy(api, model_api_port(api), sources))
    return objects
