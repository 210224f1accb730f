"""OpenTelemetry for every KAOS process: on when an OTLP endpoint is set, free when not.

``setup_telemetry(service, settings.telemetry)`` runs first in each program's ``main``: with
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or the traces endpoint) set it installs the SDK's tracer
provider with an OTLP/HTTP exporter behind a batch processor, the resource (service,
namespace and Kubernetes object from ``OTEL_RESOURCE_ATTRIBUTES``, the process as
``service.instance.id``). From then on ``enabled`` is true, and the app factory and the
client-session factory wire in ``kaos_core.tracing`` (W3C trace context in and out of
every request): so it runs before any app or session is made. Without an endpoint it
returns ``None`` having imported nothing beyond the OpenTelemetry API, whose tracers are
no-ops: the code that opens spans (``tracer(...)``) runs unchanged and costs a function
call.

The outbox helpers carry a span's context through the database: ``current_traceparent``
is the W3C ``traceparent`` of the active span (``None`` when nothing is traced), stored
with the work it schedules; ``link_to`` turns it back into a span link for whichever
process does the work later.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from kaos_core.telemetry.settings import TelemetrySettings

__all__ = [
    "Telemetry",
    "TelemetrySettings",
    "capture_content",
    "current_traceparent",
    "enabled",
    "link_to",
    "links",
    "setup_telemetry",
    "tracer",
]

_W3C = TraceContextTextMapPropagator()


@dataclass(frozen=True)
class Telemetry:
    """The installed SDK: its settings, and ``shutdown`` (flushes what is still queued)."""

    settings: TelemetrySettings
    shutdown: Callable[[], None]


_capture = False
_installed: Telemetry | None = None


def setup_telemetry(
    service: str, settings: TelemetrySettings, *, instance: str | None = None
) -> Telemetry | None:
    """Install tracing when ``settings`` (the service's ``telemetry`` group) ask for it;
    ``None`` (nothing imported) when not.

    ``service`` is the ``service.name`` unless ``OTEL_SERVICE_NAME`` says otherwise;
    ``instance`` the ``service.instance.id`` (default: host and pid).
    """
    global _capture, _installed
    _capture = settings.capture_content
    if not settings.enabled:
        return None
    # Only here: the SDK and the exporter.
    from kaos_core.telemetry import sdk

    _installed = sdk.install(settings, service, instance=instance)
    return _installed


def enabled() -> bool:
    """Whether ``setup_telemetry`` installed the SDK in this process."""
    return _installed is not None


def capture_content() -> bool:
    """Whether spans may carry content (prompts, queries, records): the opt-in setting."""
    return _capture


def tracer(name: str) -> trace.Tracer:
    """The tracer of a KAOS module (a no-op until ``setup_telemetry`` installed the SDK)."""
    return trace.get_tracer(name)


def current_traceparent() -> str | None:
    """The W3C ``traceparent`` of the active span, or ``None`` when there is none to link."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid or not ctx.trace_flags.sampled:
        return None
    carrier: dict[str, str] = {}
    _W3C.inject(carrier)
    return carrier.get("traceparent")


def link_to(traceparent: str | None) -> trace.Link | None:
    """A span link to the span a stored ``traceparent`` names (``None`` when malformed)."""
    if not traceparent:
        return None
    ctx = trace.get_current_span(_W3C.extract({"traceparent": traceparent})).get_span_context()
    return trace.Link(ctx) if ctx.is_valid else None


def links(traceparents: list[str | None]) -> list[trace.Link]:
    """The links to several stored contexts, each once, malformed ones left out."""
    out: list[trace.Link] = []
    seen: set[str] = set()
    for tp in traceparents:
        link = link_to(tp)
        if link is not None and tp not in seen:
            seen.add(str(tp))
            out.append(link)
    return out
