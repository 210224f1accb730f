"""The container images of the workloads the operator creates."""

from __future__ import annotations

from typing import ClassVar, Literal

from kaos_core import __version__
from kaos_core.settings import SettingsGroup, setting

PullPolicy = Literal["Always", "IfNotPresent", "Never"]

_IMAGE_REPO = "ghcr.io/kaos-tools"


class Images(SettingsGroup):
    """Container images of the workloads the operator creates."""

    env_prefix: ClassVar[str | None] = "KAOS_IMAGE_"
    title: ClassVar[str] = "Images"

    agent: str = setting(
        "image of every Agent's pod (runs `kaos-agent`)",
        default=f"{_IMAGE_REPO}/kaos-agent:{__version__}",
        default_doc=f"`{_IMAGE_REPO}/kaos-agent:<version>`",
    )
    mcp: str = setting(
        "image of every MCPServer's pod with a built-in runtime (runs `kaos-mcp`; it ships"
        " in the agent image)",
        default=f"{_IMAGE_REPO}/kaos-agent:{__version__}",
        default_doc=f"`{_IMAGE_REPO}/kaos-agent:<version>`",
    )
    memory: str = setting(
        "image of every MemoryStore's pod (runs `kaos-memory`)",
        default=f"{_IMAGE_REPO}/kaos-memory:{__version__}",
        default_doc=f"`{_IMAGE_REPO}/kaos-memory:<version>`",
    )
    litellm: str = setting(
        "the LiteLLM proxy of a ModelAPI in Proxy mode",
        default="ghcr.io/berriai/litellm:main-stable",
    )
    ollama: str = setting(
        "Ollama of a ModelAPI in Hosted mode",
        # Pinned: a Hosted ModelAPI's script and probes use this version's CLI.
        default="docker.io/ollama/ollama:0.17.4",
    )
    pull_policy: PullPolicy = setting(
        "pull policy of every image the operator deploys", default="IfNotPresent"
    )
