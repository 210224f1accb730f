"""A ModelAPI's desired objects: LiteLLM with its ConfigMap (Proxy) or Ollama (Hosted).

Hosted: one Ollama pod (at most one replica) on a PersistentVolumeClaim holding its model
store, replaced with the Recreate strategy so two pods never mount the claim; the pod
pulls its model on first start only and is Ready once the model answered.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import yaml
from kaos_core.crds import reasons
from kaos_core.crds.common import Telemetry
from kaos_core.crds.modelapi import ModelAPI, ServerConfig

from kaos_operator.desired import egress, security
from kaos_operator.desired.common import (
    LITELLM_PORT,
    NONROOT_UID,
    OLLAMA_PORT,
    Obj,
    bool_env,
    container,
    deployment,
    env_list,
    http_probe,
    metadata,
    restricted_security_context,
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
# address, model and context (spec.serverConfig.contextLength), and tracing are the
# operator's.
RESERVED_ENV = reserved_prefixes(
    TELEMETRY_PREFIX,
    names=frozenset({API_KEY_ENV, "OLLAMA_HOST", "OLLAMA_MODEL", "OLLAMA_CONTEXT_LENGTH"}),
)

# Hosted mode: Ollama's home (its key) and model store live on the ModelAPI's claim, so a
# restarted pod finds its model; the root filesystem stays read-only.
OLLAMA_HOME = "/var/lib/ollama"
OLLAMA_MODELS = f"{OLLAMA_HOME}/models"
# On the claim: the source the served name was last pulled from (a new spec.serverConfig
# source under the same served name is pulled again).
PULLED_MARK = f"{OLLAMA_HOME}/kaos-pulled-source"
# On the pod's /tmp (emptyDir, which outlives a container restart: emptied at each start):
# written once the model answered; the readiness probe needs it.
READY_MARK = "/tmp/kaos-model-ready"

# Serve, wait until the server answers, pull unless the claim already holds the model from
# the same source, copy it to its served name, make it answer once (a generate with an
# empty prompt loads a model; an embedding model takes a word instead), and only then say
# ready. The spec's values reach the script only through the environment (OLLAMA_MODEL,
# OLLAMA_SOURCE, OLLAMA_INSECURE), always quoted: nothing of the spec is in its text. A
# failed step exits, so the kubelet restarts the container with its backoff. The source's
# own name is kept after the copy (the blobs are shared): two spellings of one name, such
# as registry.ollama.ai/library/m:latest and m, would make removing it remove the model.
# SIGTERM reaches PID 1 (this shell), which would ignore it: it is forwarded to the server.
OLLAMA_SCRIPT = f"""\
set -u
: > {READY_MARK}
ollama serve & pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
until ollama list >/dev/null 2>&1; do
  kill -0 "$pid" 2>/dev/null || exit 1
  sleep 1
done
pulled=
[ -f {PULLED_MARK} ] && read -r pulled < {PULLED_MARK}
if [ "$pulled" = "$OLLAMA_SOURCE" ] && ollama show "$OLLAMA_MODEL" >/dev/null 2>&1; then
  printf 'kaos: %s is in the model store\\n' "$OLLAMA_MODEL" >&2
else
  printf 'kaos: pulling %s\\n' "$OLLAMA_SOURCE" >&2
  if [ "$OLLAMA_INSECURE" = true ]; then
    ollama pull --insecure "$OLLAMA_SOURCE" || exit 1
  else
    ollama pull "$OLLAMA_SOURCE" || exit 1
  fi
  if [ "$OLLAMA_SOURCE" != "$OLLAMA_MODEL" ]; then
    ollama cp "$OLLAMA_SOURCE" "$OLLAMA_MODEL" || exit 1
  fi
  printf '%s\\n' "$OLLAMA_SOURCE" > {PULLED_MARK} || exit 1
fi
ollama run "$OLLAMA_MODEL" "" >/dev/null 2>&1 ||
  ollama run "$OLLAMA_MODEL" ready >/dev/null || exit 1
printf 'kaos: %s answers\\n' "$OLLAMA_MODEL" >&2
echo ready > {READY_MARK}
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
"""
# Ready: the script's mark (the model answered once) and the server still serving it.
OLLAMA_READY = f'test -s {READY_MARK} && ollama show "$OLLAMA_MODEL" >/dev/null'


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


def models_pvc_name(api: ModelAPI) -> str:
    return f"{api.name}-models"


def _models_pvc(api: ModelAPI, server: ServerConfig) -> Obj:
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": server.storage.size}},
    }
    if server.storage.storage_class_name:
        spec["storageClassName"] = server.storage.storage_class_name
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(api, models_pvc_name(api)),
        "spec": spec,
    }


def _hosted_objects(api: ModelAPI, ctx: ModelAPIContext) -> list[Obj]:
    spec = api.spec
    server = spec.server_config
    if server is None:
        raise ValueError(f"ModelAPI {api.name}: mode Hosted without serverConfig")
    if spec.replicas > 1:
        # The CRD refuses it; an object stored before that rule is refused here.
        raise SpecRefused(
            reasons.INVALID_SPEC,
            ["spec.replicas: mode Hosted runs at most one replica (one ReadWriteOnce model store)"],
        )
    env = {
        "OLLAMA_HOST": f"0.0.0.0:{OLLAMA_PORT}",
        "OLLAMA_MODEL": server.model,
        "OLLAMA_SOURCE": server.pull_source(),
        "OLLAMA_INSECURE": bool_env(server.insecure_registry),
        # Any image, its own user or ours: Ollama's key under HOME, models on the claim.
        "HOME": OLLAMA_HOME,
        "OLLAMA_MODELS": OLLAMA_MODELS,
    }
    if server.context_length is not None:
        env["OLLAMA_CONTEXT_LENGTH"] = str(server.context_length)
    main = container(
        "ollama",
        spec.image or ctx.images.ollama,
        ctx.images.pull_policy,
        port=OLLAMA_PORT,
        command=["/bin/sh", "-c", OLLAMA_SCRIPT],
        # Ollama exports no spans; a hosted ModelAPI's calls are traced by their callers.
        env=env_list(env),
        resources=spec.resources,
        # Ready only once the model answered, not merely when the server answers; an exec
        # of the client can take more than the default second on a busy node.
        readiness={
            "exec": {"command": ["/bin/sh", "-c", OLLAMA_READY]},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
        },
        # The server answers from its first second, also while it pulls.
        liveness=http_probe("/"),
        volume_mounts=[
            {"name": "models", "mountPath": OLLAMA_HOME},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        security={**restricted_security_context(), "readOnlyRootFilesystem": True},
    )
    dep = deployment(
        api,
        container=main,
        replicas=spec.replicas,
        volumes=[
            {"name": "models", "persistentVolumeClaim": {"claimName": models_pvc_name(api)}},
            {"name": "tmp", "emptyDir": {}},
        ],
        # One ReadWriteOnce claim: the old pod lets go of it before the new one mounts it
        # (a rolling update would leave the new pod waiting on another node).
        strategy="Recreate",
        pod_security={
            "runAsNonRoot": True,
            "fsGroup": NONROOT_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    )
    # The claim first: a pod created before its claim is reported unschedulable
    # ("persistentvolumeclaim not found") until the claim appears.
    return [
        _models_pvc(api, server),
        with_overrides(dep, spec, reserved=RESERVED_ENV),
        service(api, OLLAMA_PORT),
    ]


def desired_modelapi_objects(api: ModelAPI, ctx: ModelAPIContext) -> list[Obj]:
    objects = _proxy_objects(api, ctx) if api.spec.mode == "Proxy" else _hosted_objects(api, ctx)
    objects += route_objects(api, model_api_port(api), api.spec.gateway_route, ctx.gateway)
    if ctx.posture.security_enabled:
        sources = {"Agent": ctx.agent_clients, "MemoryStore": ctx.store_clients}
        policy = security.network_policy(api, model_api_port(api), sources)
        # The operator reads the models' capabilities (status.modelCapabilities).
        policy = egress.admitting(policy, model_api_port(api), egress.operator_peer(ctx.posture))
        objects.append(egress.with_egress(policy, egress.own_egress(api.spec.egress, ctx.posture)))
    return objects
