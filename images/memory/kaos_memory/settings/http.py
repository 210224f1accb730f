"""Where the memory service listens, and how much it takes in at once."""

from __future__ import annotations

from typing import ClassVar

from kaos_core.settings import SettingsGroup, setting


class HttpSettings(SettingsGroup):
    title: ClassVar[str] = "Listening"

    host: str = setting("listen address", default="0.0.0.0")
    port: int = setting("listen port", default=8080, ge=1, le=65535)
    log_level: str = setting("log level of the JSON logs on stderr", default="INFO")
    max_body_bytes: int = setting("request body limit (413 above it)", default=1024 * 1024, ge=1024)
    max_concurrent_requests: int = setting(
        "memory requests (`/v1/*`) served at once; one more is answered 429"
        " `too_many_requests` with `Retry-After: 1` before its body is read, and changes"
        " nothing (health, readiness and metrics are never limited); `0`: unlimited",
        default=0,
        ge=0,
        le=100_000,
    )
