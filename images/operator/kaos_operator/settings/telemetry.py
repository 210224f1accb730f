"""The tracing default of every pod the operator makes (the chart's ``telemetry`` values);
each resource's ``spec.telemetry`` overrides it field by field."""

from __future__ import annotations

from typing import ClassVar

from kaos_core.crds.common import Telemetry
from kaos_core.settings import SettingsGroup, setting


class PodTelemetry(SettingsGroup):
    """Where the pods' spans go by default, how many are kept, whether content is."""

    env_prefix: ClassVar[str | None] = "KAOS_TELEMETRY_"
    title: ClassVar[str] = "Tracing of the pods the operator makes"

    endpoint: str | None = setting(
        "OTLP/HTTP receiver every pod the operator makes exports spans to, unless its"
        " resource's spec.telemetry says otherwise; unset: tracing off by default",
        default=None,
        pattern=r"^https?://\S+$",
    )
    sampling_ratio: float = setting(
        "default share of traces kept (0 to 1)", default=1.0, ge=0, le=1
    )
    capture_content: bool = setting(
        "default of content capture on spans (prompts, memory queries): personal data",
        default=False,
    )

    def defaults(self) -> Telemetry:
        """The default as the CRDs' ``spec.telemetry`` shape."""
        return Telemetry(
            endpoint=self.endpoint,
            sampling_ratio=self.sampling_ratio,
            capture_content=self.capture_content,
        )
