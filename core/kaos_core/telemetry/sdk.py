"""The OpenTelemetry SDK, imported only when tracing is on (``setup_telemetry``)."""

from __future__ import annotations

import os
import socket

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from kaos_core import tracing
from kaos_core.telemetry import Telemetry
from kaos_core.telemetry.settings import TelemetrySettings


def _attributes(text: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def traces_url(settings: TelemetrySettings) -> str:
    if settings.traces_endpoint:
        return settings.traces_endpoint
    return f"{(settings.endpoint or '').rstrip('/')}/v1/traces"


def install(settings: TelemetrySettings, service: str, *, instance: str | None) -> Telemetry:
    attributes: dict[str, str] = {
        **_attributes(settings.resource_attributes),
        "service.name": settings.service_name or service,
        "service.instance.id": instance or f"{socket.gethostname()}:{os.getpid()}",
    }
    # The sampler comes from OTEL_TRACES_SAMPLER(_ARG), read by the provider itself.
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url(settings))))
    trace.set_tracer_provider(provider)
    # From now on apps and client sessions are made with the aiohttp hooks.
    tracing.enable()
    return Telemetry(settings=settings, shutdown=provider.shutdown)
