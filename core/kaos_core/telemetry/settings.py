"""Tracing settings: the standard ``OTEL_*`` variables every KAOS process reads.

No KAOS-specific names: the operator projects these into pods, and anything else that
speaks OpenTelemetry (a collector's injector, a developer's shell) sets the same ones.
Tracing is on when an OTLP endpoint is set and ``OTEL_SDK_DISABLED`` is not true; the
SDK reads the sampler and resource variables itself, they are declared here so they are
validated and documented (the README's tables are generated from these fields by
``hack/gen-docs``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kaos_core.settings import EnvSettings

GROUPS: dict[str, str] = {"telemetry": "Tracing (every KAOS process)"}


def _otel(env: str, description: str, *, default_doc: str | None = None, **kwargs: Any) -> Any:
    extra: dict[str, Any] = {"env": env, "group": "telemetry"}
    if default_doc is not None:
        extra["default_doc"] = default_doc
    return Field(description=description, json_schema_extra=extra, **kwargs)


class TelemetrySettings(EnvSettings):
    endpoint: str | None = _otel(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "base URL of an OTLP/HTTP receiver (a Jaeger or a collector, for example"
        " `http://jaeger:4318`); spans go to `<endpoint>/v1/traces`. Unset, with no traces"
        " endpoint either: tracing is off and no SDK or exporter module is imported.",
        default=None,
    )
    traces_endpoint: str | None = _otel(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "full URL spans are posted to; overrides the endpoint above for traces.",
        default=None,
    )
    disabled: bool = _otel(
        "OTEL_SDK_DISABLED", "`true` turns tracing off even with an endpoint set.", default=False
    )
    service_name: str | None = _otel(
        "OTEL_SERVICE_NAME",
        "the `service.name` of the spans; the operator sets the resource's name.",
        default=None,
        default_doc="the program (`kaos-memory`, `kaos-mcp`, ...); an agent: its name",
    )
    resource_attributes: str | None = _otel(
        "OTEL_RESOURCE_ATTRIBUTES",
        "`key=value` pairs, comma-separated, added to every span's resource; the operator"
        " sets `k8s.namespace.name`, `kaos.resource.kind` and `kaos.resource.name`.",
        default=None,
    )
    sampler: str | None = _otel(
        "OTEL_TRACES_SAMPLER",
        "the SDK's sampler; the operator sets `parentbased_traceidratio`, so a trace is kept"
        " or dropped as a whole across services.",
        default=None,
        default_doc="`parentbased_always_on`",
    )
    sampler_arg: float | None = _otel(
        "OTEL_TRACES_SAMPLER_ARG",
        "the ratio of traces kept (`0` to `1`) by a ratio sampler.",
        default=None,
        ge=0,
        le=1,
    )
    capture_content: bool = _otel(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "`true` records content on spans: prompts, completions and tool arguments (agent),"
        " the query text and the records (memory service: `gen_ai.memory.query.text`,"
        " `gen_ai.memory.records`). Off by default: content is personal data.",
        default=False,
    )

    @property
    def enabled(self) -> bool:
        return not self.disabled and bool(self.endpoint or self.traces_endpoint)
