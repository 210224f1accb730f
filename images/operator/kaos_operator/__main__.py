"""``kaos-operator``: run the operator until SIGTERM."""

from __future__ import annotations

from kaos_core.http import run_service
from kaos_core.logging import configure_logging
from kaos_core.settings import SettingsError, exit_on_settings_error, load_settings
from kaos_core.telemetry import setup_telemetry

from kaos_operator.app import create_app
from kaos_operator.settings import OperatorSettings


def main() -> None:
    try:
        settings = load_settings(OperatorSettings)
        setup_telemetry("kaos-operator", settings.telemetry)
    except SettingsError as exc:
        exit_on_settings_error(exc)
    server = settings.server
    configure_logging("kaos-operator", server.log_level)
    run_service(create_app(settings), server.host, server.port)


if __name__ == "__main__":
    main()
