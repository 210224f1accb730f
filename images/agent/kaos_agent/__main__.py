"""``kaos-agent``: serve one agent until SIGTERM."""

from __future__ import annotations

import logging
import os

from kaos_core.http import run_service
from kaos_core.logging import configure_logging
from kaos_core.settings import SettingsError, exit_on_settings_error, load_settings
from kaos_core.telemetry import setup_telemetry

from kaos_agent.app import create_app
from kaos_agent.settings import AgentSettings


def main() -> None:
    configure_logging("kaos-agent", os.environ.get("KAOS_LOG_LEVEL", "INFO"))
    # One line per outgoing HTTP request (model, MCP) drowns the service's own log.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        settings = load_settings(AgentSettings)
        setup_telemetry(settings.agent.name, settings.telemetry)
    except SettingsError as exc:
        exit_on_settings_error(exc)
    run_service(create_app(settings), settings.server.host, settings.server.port)


if __name__ == "__main__":
    main()
