"""The chart's ``telemetry`` values: validated by the schema, rendered into the operator's
ConfigMap, and read back by the operator's settings as the default of every pod."""

from __future__ import annotations

from kaos_core.crds import Telemetry
from kaos_operator.settings import OperatorSettings

from tests.fixtures.helm import Helm, find_object

SCHEMA_ERROR = "values don't meet the specifications of the schema(s)"


def config(helm: Helm, **telemetry: object) -> dict[str, str]:
    values = {"telemetry": telemetry} if telemetry else None
    objects = helm.template(values=values)
    data: dict[str, str] = find_object(objects, "ConfigMap", "kaos-operator")["data"]
    return data


def test_off_by_default_and_the_operator_reads_no_endpoint(helm: Helm) -> None:
    data = config(helm)
    assert data["KAOS_TELEMETRY_ENDPOINT"] == ""
    assert not [k for k in data if k.startswith("OTEL_")]
    assert OperatorSettings.from_env(data).reconcile.telemetry == Telemetry(
        endpoint=None, sampling_ratio=1.0, capture_content=False
    )


def test_an_endpoint_reaches_the_operator_and_its_default_for_every_pod(helm: Helm) -> None:
    data = config(
        helm, endpoint="http://jaeger.observability:4318", samplingRatio=0.25, captureContent=True
    )
    # The operator's own spans.
    assert data["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger.observability:4318"
    assert data["OTEL_SERVICE_NAME"] == "kaos-operator"
    assert data["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"
    assert data["OTEL_TRACES_SAMPLER_ARG"] == "0.25"
    assert "k8s.namespace.name=kaos-system" in data["OTEL_RESOURCE_ATTRIBUTES"]
    # The default it projects into the pods it makes (kaos_operator.desired.telemetry).
    assert OperatorSettings.from_env(data).reconcile.telemetry == Telemetry(
        endpoint="http://jaeger.observability:4318", sampling_ratio=0.25, capture_content=True
    )


def test_bad_telemetry_values_fail_with_the_schema_message(helm: Helm) -> None:
    for values, where in (
        ({"endpoint": "jaeger:4318"}, "at '/telemetry/endpoint'"),
        ({"samplingRatio": 1.5}, "at '/telemetry/samplingRatio': maximum"),
        ({"captureContent": "yes"}, "at '/telemetry/captureContent'"),
        ({"exporter": "zipkin"}, "additional properties 'exporter' not allowed"),
    ):
        proc = helm.template_text(values={"telemetry": values}, check=False)
        assert proc.returncode != 0, values
        assert SCHEMA_ERROR in proc.stderr and where in proc.stderr, proc.stderr
