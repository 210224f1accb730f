"""Who the agent is and where it listens: its name, identity and instructions, its address
and the URL on its agent card."""

from __future__ import annotations

from typing import ClassVar

from kaos_core import agent_env as env
from kaos_core.errors import KaosError
from kaos_core.settings import SettingsGroup, setting
from kaos_core.wire import validate_agent_identity
from pydantic import field_validator

from kaos_agent.settings.base import http_url


class AgentIdentity(SettingsGroup):
    """The agent's name, identity and instructions."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Identity and instructions"

    name: str = setting(
        "name on the agent card and in `/v1/models`", env=env.AGENT_NAME, default="agent"
    )
    description: str = setting("agent card description", env=env.AGENT_DESCRIPTION, default="")
    identity: str | None = setting(
        "`kaos://agent/<ns>/<name>`; sent as `X-Agent-Identity` to memory; required for "
        "remote memory at `agent` scope or under `MEMORY_REQUIRE_AGENT_IDENTITY`",
        env=env.AGENT_IDENTITY,
        default=None,
    )
    instructions: str = setting(
        "system instructions of the reasoning loop",
        env=env.AGENT_INSTRUCTIONS,
        default="You are a helpful assistant.",
    )

    @field_validator("identity")
    @classmethod
    def _agent_identity(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return validate_agent_identity(value)
        except KaosError:
            raise ValueError("must be kaos://agent/<namespace>/<name>") from None


class AgentServer(SettingsGroup):
    """Where the agent listens, and what its agent card says."""

    env_prefix: ClassVar[str | None] = ""
    title: ClassVar[str] = "Listening and A2A"

    host: str = setting("listen address", env=env.AGENT_HOST, default="0.0.0.0")
    port: int = setting("listen port", env=env.AGENT_PORT, default=8000, ge=1, le=65535)
    public_url: str | None = setting(
        "URL put on the agent card",
        env=env.AGENT_PUBLIC_URL,
        default=None,
        default_doc="`http://<host>:<port>`",
    )
    a2a_enabled: bool = setting(
        "serve the agent card and A2A JSON-RPC at `/`", env=env.AGENT_A2A_ENABLED, default=True
    )

    @field_validator("public_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        return http_url(value)

    def card_url(self) -> str:
        return self.public_url or f"http://{self._card_host()}:{self.port}"

    def _card_host(self) -> str:
        return "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
