"""Tracing settings: the standard ``OTEL_*`` variables every KAOS process reads.

No KAOS-specific names: the operator projects these into pods, and anything else that
speaks OpenTelemetry (a collector's injector, a developer's shell) sets the same ones.
Tracing is on when an OTLP endpoint is set and ``OTEL_SDK_DISABLED`` is not true; the
SDK reads the sampler and resource variables itself, they are declared here so they are
validated and documented (the tables are generated from these fields by ``hack/gen-docs``).
Every service's settings hold this group as ``telemetry``.
"""

from __future__ import annotations

from typing import ClassVar

from kaos_core.settings import SettingsGroup, setting

# The group's title in the generated tables.
GROUPS: dict[str, str] = {"telemetry": "Tracing (every KAOS process)"}


class TelemetrySettings(SettingsGroup):
    """The ``OTEL_*`` variables: whether and where spans are exported, and what they carry."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = GROUPS["telemetry"]

    endpoint: str | None = setting(
        "base URL of an OTLP/HTTP receiver (a Jaeger or a collector, for example"
        " `http://jaeger:4318`); spans go to `<endpoint>/v1/traces`. Unset, with no traces"
        " endpoint either: tracing is off and no SDK or exporter module is imported.",
        env="OTEL_EXPORTER_OTLP_ENDPOINT",
        default=None,
    )
    traces_endpoint: str | None = setting(
        "full URL spans are posted to; overrides the endpoint above for traces.",
        env="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        default=None,
    )
    disabled: bool = setting(
        "`true` turns tracing off even with an endpoint set.",
        env="OTEL_SDK_DISABLED",
        default=False,
    )
    service_name: str | None = setting(
        "the `service.name` of the spans; the operator sets the resource's name.",
        env="OTEL_SERVICE_NAME",
        default=None,
        default_doc="the program (`kaos-memory`, `kaos-mcp`, ...); an agent: its name",
    )
    resource_attributes: str | None = setting(
        "`key=value` pairs, comma-separated, added to every span's resource; the operator"
        " sets `k8s.namespace.name`, `kaos.resource.kind` and `kaos.resource.name`.",
        env="OTEL_RESOURCE_ATTRIBUTES",
        default=None,
    )
    sampler: str | None = setting(
        "the SDK's sampler; the operator sets `parentbased_traceidratio`, so a trace is kept"
        " or dropped as a whole across services.",
        env="OTEL_TRACES_SAMPLER",
        default=None,
        default_doc="`parentbased_always_on`",
    )
    sampler_arg: float | None = setting(
        "the ratio of traces kept (`0` to `1`) by a ratio sampler.",
        env="OTEL_TRACES_SAMPLER_ARG",
        default=None,
        ge=0,
        le=1,
    )
    capture_content: bool = setting(
        "`true` records content on spans: prompts, completions and tool arguments (agent),"
        " the query text and the records (memory service: `gen_ai.memory.query.text`,"
        " `gen_ai.memory.records`). Off by default: content is personal data.",
        env="OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        default=False,
    )

    @property
    def enabled(self) -> bool:
        return not self.disabled and bool(self.endpoint or self.traces_endpoint)
