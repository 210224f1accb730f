"""``kaos-agent``: serve one agent until SIGTERM."""

from __future__ import annotations

import logging
import os

from kaos_core.http import run_service
from kaos_core.http.limits import HttpLimits
from kaos_core.logging import configure_logging
from kaos_core.settings import SettingsError, exit_on_settings_error
from kaos_core.telemetry import setup_telemetry

from kaos_agent.app import create_app
from kaos_agent.settings import AgentSettings


def main() -> None:
    configure_logging("kaos-agent", os.environ.get("KAOS_LOG_LEVEL", "INFO"))
    # One line per outgoing HTTP request (model, MCP) drowns the service's own log.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        # Read here (create_base_app reads them again) so a bad value exits 2 with one line.
        HttpLimits.from_env()
        settings = AgentSettings.from_env()
        setup_telemetry(settings.name)
    except SettingsError as exc:
        exit_on_settings_error(exc)
    run_service(create_app(settings), settings.host, settings.port)


if __name__ == "__main__":
    main()
