"""The ``OTEL_*`` environment of a resource's pods: its ``spec.telemetry`` over the default.

Each field a resource leaves out takes the operator's default (the chart's ``telemetry``
values, ``OperatorSettings.telemetry``). Tracing is on for a pod when the result has an
endpoint and is not ``enabled: false``; then the pod gets the standard variables every
KAOS process reads (``kaos_core.telemetry``): the OTLP/HTTP endpoint, its name as
``service.name``, namespace and object as resource attributes, a parent-based ratio
sampler (a trace is kept or dropped as a whole across services, decided where it
starts) and the content opt-in. Off, it gets none, so a pod that was traced loses them
on the next apply.
"""

from __future__ import annotations

from kaos_core.crds.common import CustomObject, Telemetry
from kaos_core.telemetry import conventions as otel

from kaos_operator.desired.common import bool_env

ENDPOINT_ENV = "OTEL_EXPORTER_OTLP_ENDPOINT"
PROTOCOL_ENV = "OTEL_EXPORTER_OTLP_PROTOCOL"
SERVICE_ENV = "OTEL_SERVICE_NAME"
RESOURCE_ENV = "OTEL_RESOURCE_ATTRIBUTES"
SAMPLER_ENV = "OTEL_TRACES_SAMPLER"
SAMPLER_ARG_ENV = "OTEL_TRACES_SAMPLER_ARG"
CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# LiteLLM's own OpenTelemetry callback (``callbacks: ["otel"]``) reads these two.
LITELLM_EXPORTER_ENV = "OTEL_EXPORTER"
LITELLM_ENDPOINT_ENV = "OTEL_ENDPOINT"


def effective(own: Telemetry | None, default: Telemetry) -> Telemetry:
    """The resource's block with every unset field taken from the default."""
    if own is None:
        return default
    fields = {k: v for k, v in own.model_dump().items() if v is not None}
    return default.model_copy(update=fields)


def tracing_on(t: Telemetry) -> bool:
    return bool(t.endpoint) and t.enabled is not False


def telemetry_env(owner: CustomObject, own: Telemetry | None, default: Telemetry) -> dict[str, str]:
    """The ``OTEL_*`` variables of ``owner``'s pods (empty when tracing is off for it)."""
    t = effective(own, default)
    if not tracing_on(t):
        return {}
    attributes = {
        "service.namespace": owner.namespace,
        otel.RECONCILE_NAMESPACE: owner.namespace,
        otel.RECONCILE_KIND: owner.kind,
        otel.RECONCILE_NAME: owner.name,
    }
    ratio = 1.0 if t.sampling_ratio is None else t.sampling_ratio
    return {
        ENDPOINT_ENV: str(t.endpoint),
        PROTOCOL_ENV: "http/protobuf",
        SERVICE_ENV: owner.name,
        RESOURCE_ENV: ",".join(f"{k}={v}" for k, v in attributes.items()),
        SAMPLER_ENV: "parentbased_traceidratio",
        SAMPLER_ARG_ENV: f"{ratio:g}",
        CAPTURE_ENV: bool_env(bool(t.capture_content)),
    }


def litellm_telemetry_env(env: dict[str, str]) -> dict[str, str]:
    """What LiteLLM's ``otel`` callback needs beside the standard variables."""
    if ENDPOINT_ENV not in env:
        return {}
    return {
        LITELLM_EXPORTER_ENV: "otlp_http",
        LITELLM_ENDPOINT_ENV: env[ENDPOINT_ENV].rstrip("/") + "/v1/traces",
    }
