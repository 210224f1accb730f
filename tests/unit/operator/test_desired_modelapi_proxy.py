"""ModelAPI: provider, configYaml (inline, from a Secret), proxyConfig.env, Hosted status."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import yaml
from kaos_core.crds import reasons
from kaos_core.crds.common import Telemetry
from kaos_operator.desired import ModelAPIContext, desired_modelapi_objects
from kaos_operator.desired.modelapi import CONFIG_HASH_ANNOTATION
from kaos_operator.desired.overrides import OverrideRefused, SpecRefused
from kaos_operator.reconcilers import build_reconcilers

from tests.support.operator_context import FakeContext, raw
from tests.support.operator_objects import IMAGES, by_kind, env_of, model_api

CONFIG = """\
model_list:
  - model_name: fast
    litellm_params:
      model: anthropic/claude-haiku
      api_key: os.environ/ANTHROPIC_API_KEY
router_settings:
  num_retries: 2
"""


def objects(**proxy: Any) -> dict[str, dict[str, Any]]:
    api = model_api(mode="Proxy", proxyConfig={"models": ["fast"], **proxy})
    return by_kind(desired_modelapi_objects(api, ModelAPIContext(images=IMAGES)))


def config_of(objs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return dict(yaml.safe_load(objs["ConfigMap"]["data"]["config.yaml"]))


def test_provider_prefixes_bare_model_names_only() -> None:
    api = model_api(
        mode="Proxy", proxyConfig={"provider": "openai", "models": ["gpt-4o-mini", "azure/gpt4"]}
    )
    config = config_of(by_kind(desired_modelapi_objects(api, ModelAPIContext(images=IMAGES))))
    assert [(e["model_name"], e["litellm_params"]["model"]) for e in config["model_list"]] == [
        ("gpt-4o-mini", "openai/gpt-4o-mini"),
        ("azure/gpt4", "azure/gpt4"),
    ]


def test_inline_config_yaml_is_the_config_file() -> None:
    objs = objects(configYaml={"fromString": CONFIG})
    assert config_of(objs) == yaml.safe_load(CONFIG)
    dep = objs["Deployment"]
    assert dep["spec"]["template"]["spec"]["volumes"] == [
        {"name": "config", "configMap": {"name": "llm-litellm"}}
    ]
    # A different config is a different pod template: LiteLLM reads it once.
    other = objects(configYaml={"fromString": CONFIG.replace("2", "3")})["Deployment"]
    annotations = dep["spec"]["template"]["metadata"]["annotations"]
    assert annotations != other["spec"]["template"]["metadata"]["annotations"]


def test_inline_config_keeps_tracing() -> None:
    api = model_api(
        mode="Proxy", proxyConfig={"models": ["fast"], "configYaml": {"fromString": CONFIG}}
    )
    ctx = ModelAPIContext(images=IMAGES, telemetry=Telemetry(endpoint="http://otel:4318"))
    config = config_of(by_kind(desired_modelapi_objects(api, ctx)))
    assert config["litellm_settings"] == {"callbacks": ["otel"]}
    assert config["router_settings"] == {"num_retries": 2}


def test_config_yaml_from_a_secret_is_mounted_as_the_config_file() -> None:
    objs = objects(configYaml={"fromSecretKeyRef": {"name": "litellm", "key": "config"}})
    assert set(objs) == {"Deployment", "Service"}  # no ConfigMap of the operator's
    dep = objs["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {
            "name": "config",
            "secret": {
                "secretName": "litellm",
                "items": [{"key": "config", "path": "config.yaml"}],
            },
        }
    ]
    container = pod["containers"][0]
    assert container["volumeMounts"] == [
        {"name": "config", "mountPath": "/etc/litellm", "readOnly": True}
    ]
    assert container["args"][:2] == ["--config", "/etc/litellm/config.yaml"]
    assert CONFIG_HASH_ANNOTATION in dep["spec"]["template"]["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("model_list: [", "spec.proxyConfig.configYaml.fromString: not valid YAML (line 1)"),
        ("- a\n- b\n", "spec.proxyConfig.configYaml.fromString: not a YAML mapping"),
    ],
)
def test_invalid_inline_config_is_refused(text: str, problem: str) -> None:
    with pytest.raises(SpecRefused) as info:
        objects(configYaml={"fromString": text})
    assert info.value.reason == reasons.INVALID_SPEC
    assert info.value.problems == [problem]


def test_proxy_env_and_api_key_reach_the_container() -> None:
    env = [
        {"name": "ANTHROPIC_API_KEY", "valueFrom": {"secretKeyRef": {"name": "anth", "key": "k"}}},
        {"name": "LITELLM_LOG", "value": "ERROR"},
    ]
    objs = objects(env=env, apiKeySecretRef={"name": "llm-key", "key": "token"})
    got = env_of(objs["Deployment"])
    assert got["MODEL_API_KEY"] == {"secretKeyRef": {"name": "llm-key", "key": "token"}}
    assert got["ANTHROPIC_API_KEY"] == {"secretKeyRef": {"name": "anth", "key": "k"}}
    assert got["LITELLM_LOG"] == "ERROR"


def test_proxy_env_cannot_shadow_the_operator_or_repeat_container_env() -> None:
    with pytest.raises(OverrideRefused) as info:
        objects(
            env=[{"name": "MODEL_API_KEY", "value": "x"}],
            apiKeySecretRef={"name": "k", "key": "v"},
        )
    assert info.value.problems == ["spec.proxyConfig.env: MODEL_API_KEY is set by the operator"]

    api = model_api(
        mode="Proxy",
        proxyConfig={"models": ["m"], "env": [{"name": "A", "value": "1"}]},
        container={"env": [{"name": "A", "value": "2"}]},
    )
    with pytest.raises(OverrideRefused) as info:
        desired_modelapi_objects(api, ModelAPIContext(images=IMAGES))
    assert info.value.problems == ["spec.container.env: A is set twice"]


async def test_hosted_reports_its_model_pull_in_status() -> None:
    """ModelPulled follows the pod's readiness, which needs the model pulled and answering."""
    ctx = FakeContext()
    source = "models.registry.svc:5000/library/smollm2:135m"
    spec = {"mode": "Hosted", "serverConfig": {"model": "smollm2:135m", "source": source}}
    ctx.add(raw("ModelAPI", "local", spec))

    async def unread(url: str, mode: str, models: Sequence[str]) -> dict[str, list[str]]:
        return {}

    rec = build_reconcilers(ctx, capability_reader=unread)["ModelAPI"]
    await rec.reconcile("ns", "local")
    status = ctx.status_of("ModelAPI", "ns", "local")
    pulled = next(c for c in status["conditions"] if c["type"] == reasons.MODEL_PULLED)
    assert (pulled["status"], pulled["reason"]) == ("False", reasons.PULLING)
    assert pulled["message"] == (
        f"waiting for the pod to pull smollm2:135m from {source} (first start only) and load it"
    )
    assert status["models"] == ["smollm2:135m"]

    ctx.deployment_available("ns", "local")
    await rec.reconcile("ns", "local")
    status = ctx.status_of("ModelAPI", "ns", "local")
    pulled = next(c for c in status["conditions"] if c["type"] == reasons.MODEL_PULLED)
    assert (pulled["status"], pulled["reason"], pulled["message"]) == (
        "True",
        reasons.PULLED,
        f"smollm2:135m pulled from {source} and answering",
    )


def test_a_keyless_backend_gets_a_placeholder_key() -> None:
    """LiteLLM's OpenAI client refuses to call without a key, and LiteLLM refuses
    `dimensions` for embedding models it does not know (both found running the samples on
    the real node): a backend at apiBase gets a key it ignores and may take dimensions."""
    config = config_of(objects(apiBase="http://devmodel:8000/v1", models=["openai/devmodel"]))
    assert config["model_list"] == [
        {
            "model_name": "openai/devmodel",
            "litellm_params": {
                "model": "openai/devmodel",
                "api_base": "http://devmodel:8000/v1",
                "allowed_openai_params": ["dimensions"],
                "api_key": "none",
            },
        }
    ]
    # No apiBase: the provider's own endpoint and its key from the environment, as before.
    assert "api_key" not in config_of(objects())["model_list"][0]["litellm_params"]
