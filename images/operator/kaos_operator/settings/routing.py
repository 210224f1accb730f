"""Gateway API: the Gateway every resource's HTTPRoute attaches to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from kaos_core.settings import SettingsGroup, setting

_DNS_LABEL = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


@dataclass(frozen=True)
class GatewayRef:
    """The Gateway (Gateway API) every resource's HTTPRoute attaches to."""

    name: str
    namespace: str
    section_name: str | None = None


class GatewayApi(SettingsGroup):
    """Whether resources get HTTPRoutes, and the Gateway they attach to."""

    env_prefix: ClassVar[str | None] = "KAOS_GATEWAY_"
    title: ClassVar[str] = "Gateway API"

    enabled: bool = setting(
        "make an HTTPRoute for each Agent, ModelAPI and MCPServer with spec.gatewayRoute"
        " (needs the Gateway API CRDs)",
        env="API_ENABLED",
        default=False,
    )
    name: str = setting(
        "with Gateway API on (required there): the Gateway the routes attach to",
        default="",
        pattern=_DNS_LABEL,
    )
    namespace: str = setting(
        "the Gateway's namespace; empty: each resource's own", default="", pattern=_DNS_LABEL
    )
    section_name: str = setting(
        "the Gateway listener the routes attach to; empty: every listener", default=""
    )

    def problems(self, prefix: str) -> list[str]:
        if self.enabled and not self.name:
            return [f"{self.env_name('enabled', prefix)} needs {self.env_name('name', prefix)}"]
        return []

    def ref(self) -> GatewayRef | None:
        """The Gateway routes attach to; ``None`` with Gateway API off."""
        if not self.enabled:
            return None
        return GatewayRef(
            name=self.name, namespace=self.namespace, section_name=self.section_name or None
        )
