"""``kaos-operator``: run the operator until SIGTERM."""

from __future__ import annotations

from kaos_core.http import run_service
from kaos_core.http.limits import HttpLimits
from kaos_core.logging import configure_logging
from kaos_core.settings import SettingsError, exit_on_settings_error
from kaos_core.telemetry import setup_telemetry

from kaos_operator.app import create_app
from kaos_operator.settings import OperatorSettings


def main() -> None:
    try:
        # Read here (create_base_app reads them again) so a bad value exits 2 with one line.
        HttpLimits.from_env()
        settings = OperatorSettings.from_env()
        setup_telemetry("kaos-operator")
    except SettingsError as exc:
        exit_on_settings_error(exc)
    configure_logging("kaos-operator", settings.log_level)
    run_service(create_app(settings), settings.host, settings.port)


if __name__ == "__main__":
    main()
