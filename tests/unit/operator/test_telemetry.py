"""The ``OTEL_*`` environment the operator projects: the chart default, each resource's
``spec.telemetry`` over it, every kind's pods, LiteLLM's callback, and the settings."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kaos_core.crds import Telemetry
from kaos_core.settings import SettingsError
from kaos_operator.desired import (
    AgentContext,
    McpContext,
    MemoryStoreContext,
    ModelAPIContext,
    desired_agent_objects,
    desired_mcpserver_objects,
    desired_memorystore_objects,
    desired_modelapi_objects,
)
from kaos_operator.settings import OperatorSettings
from pydantic import ValidationError

from tests.support.operator_objects import (
    IMAGES,
    OPEN,
    agent,
    by_kind,
    env_of,
    mcp_server,
    model_api,
    store,
)

JAEGER = "http://jaeger.observability:4318"
DEFAULT = Telemetry(endpoint=JAEGER, sampling_ratio=0.25, capture_content=False)


def _pods(default: Telemetry, **own: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The env of each kind's Deployment, with ``own[kind]`` as that resource's block."""

    def spec(kind: str) -> dict[str, Any]:
        return {"telemetry": own[kind]} if kind in own else {}

    a = agent("a1", **spec("Agent"))
    objs = {
        "Agent": desired_agent_objects(
            a,
            AgentContext(
                images=IMAGES,
                posture=OPEN,
                model_api_url="http://llm.ns.svc:4000",
                model_name="m",
                telemetry=default,
            ),
        ),
        "MemoryStore": desired_memorystore_objects(
            store("mem", **spec("MemoryStore")),
            MemoryStoreContext(
                images=IMAGES,
                posture=OPEN,
                model_api_url="http://llm.ns.svc:4000",
                summarization_model="m",
                embedding_model="e",
                telemetry=default,
            ),
        ),
        "MCPServer": desired_mcpserver_objects(
            mcp_server(
                "tools", **({"params": "def f() -> str:\n    return ''\n"} | spec("MCPServer"))
            ),
            McpContext(images=IMAGES, telemetry=default),
        ),
        "ModelAPI": desired_modelapi_objects(
            model_api(
                "llm",
                mode="Proxy",
                proxyConfig={"models": ["openai/a"]},
                **spec("ModelAPI"),
            ),
            ModelAPIContext(images=IMAGES, telemetry=default),
        ),
    }
    return {kind: env_of(by_kind(o)["Deployment"]) for kind, o in objs.items()}


def otel(env: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in env.items() if k.startswith("OTEL_")}


def test_no_endpoint_means_no_otel_variables_in_any_pod() -> None:
    for kind, env in _pods(Telemetry()).items():
        assert otel(env) == {}, kind


def test_the_default_reaches_every_pod_with_its_object_as_resource() -> None:
    pods = _pods(DEFAULT)
    names = {"Agent": "a1", "MemoryStore": "mem", "MCPServer": "tools", "ModelAPI": "llm"}
    for kind, env in pods.items():
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == JAEGER, kind
        assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
        assert env["OTEL_SERVICE_NAME"] == names[kind]
        attributes = dict(item.split("=", 1) for item in env["OTEL_RESOURCE_ATTRIBUTES"].split(","))
        assert attributes == {
            "service.namespace": "ns",
            "k8s.namespace.name": "ns",
            "kaos.resource.kind": kind,
            "kaos.resource.name": names[kind],
        }
        assert env["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"
        assert env["OTEL_TRACES_SAMPLER_ARG"] == "0.25"
        assert env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] == "false"


def test_a_resource_overrides_the_default_field_by_field() -> None:
    pods = _pods(
        DEFAULT,
        Agent={"samplingRatio": 1, "captureContent": True},
        MemoryStore={"endpoint": "http://collector.other:4318"},
        MCPServer={"enabled": False},
    )
    assert pods["Agent"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == JAEGER
    assert pods["Agent"]["OTEL_TRACES_SAMPLER_ARG"] == "1"
    assert pods["Agent"]["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] == "true"
    assert pods["MemoryStore"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector.other:4318"
    assert pods["MemoryStore"]["OTEL_TRACES_SAMPLER_ARG"] == "0.25"
    assert otel(pods["MCPServer"]) == {}
    assert pods["ModelAPI"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == JAEGER


def test_a_resource_can_trace_without_a_default() -> None:
    pods = _pods(Telemetry(), Agent={"endpoint": JAEGER})
    assert pods["Agent"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == JAEGER
    assert pods["Agent"]["OTEL_TRACES_SAMPLER_ARG"] == "1"
    assert otel(pods["MemoryStore"]) == {}


def test_litellm_proxy_gets_its_otel_callback_only_when_traced() -> None:
    api = model_api("llm", mode="Proxy", proxyConfig={"models": ["openai/a"]})
    traced = by_kind(
        desired_modelapi_objects(api, ModelAPIContext(images=IMAGES, telemetry=DEFAULT))
    )
    config = yaml.safe_load(traced["ConfigMap"]["data"]["config.yaml"])
    assert config["litellm_settings"] == {"callbacks": ["otel"]}
    env = env_of(traced["Deployment"])
    assert env["OTEL_EXPORTER"] == "otlp_http"
    assert env["OTEL_ENDPOINT"] == f"{JAEGER}/v1/traces"
    plain = by_kind(desired_modelapi_objects(api, ModelAPIContext(images=IMAGES)))
    assert "litellm_settings" not in yaml.safe_load(plain["ConfigMap"]["data"]["config.yaml"])
    assert otel(env_of(plain["Deployment"])) == {}


def test_the_block_is_validated() -> None:
    with pytest.raises(ValidationError):
        agent("a1", telemetry={"samplingRatio": 1.5})
    with pytest.raises(ValidationError):
        agent("a1", telemetry={"endpoint": "jaeger:4318"})  # no scheme


def test_operator_settings_carry_the_chart_default() -> None:
    settings = OperatorSettings.from_env(
        {
            "KAOS_TELEMETRY_ENDPOINT": JAEGER,
            "KAOS_TELEMETRY_SAMPLING_RATIO": "0.5",
            "KAOS_TELEMETRY_CAPTURE_CONTENT": "true",
        }
    )
    assert settings.reconcile.telemetry == Telemetry(
        endpoint=JAEGER, sampling_ratio=0.5, capture_content=True
    )
    assert OperatorSettings.from_env({}).reconcile.telemetry.endpoint is None
    with pytest.raises(SettingsError, match="KAOS_TELEMETRY_SAMPLING_RATIO"):
        OperatorSettings.from_env({"KAOS_TELEMETRY_SAMPLING_RATIO": "2"})
