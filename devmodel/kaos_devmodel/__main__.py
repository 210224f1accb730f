"""Command line of ``kaos-devmodel``: flags override ``KAOS_DEVMODEL_*`` variables.

The command line is read before the server is imported: ``--help`` (and a wrong flag)
answers without loading the server and without opening a socket.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

PROG = "kaos-devmodel"
EPILOG = """\
Every flag has a variable (KAOS_DEVMODEL_HOST, KAOS_DEVMODEL_PORT, ...); other variables
script replies (KAOS_DEVMODEL_SCRIPT) and inject latency and faults (KAOS_DEVMODEL_DELAY,
KAOS_DEVMODEL_ERROR_RATE, KAOS_DEVMODEL_HANG), as docs/development/devmodel.md describes.
A wrong value exits 2 naming the variable."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Deterministic OpenAI-compatible model server for development and tests.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port to listen on (default 8000)")
    parser.add_argument(
        "--embedding-dims", type=int, help="embedding dimension when a request names none"
    )
    parser.add_argument("--script-file", help="scripted rules, a JSON or YAML file")
    parser.add_argument("--log-level", help="log level (default INFO)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    serve(parse_args(argv))


def serve(args: argparse.Namespace) -> None:
    # The server is imported only now that the command line asked for it (see above).
    from kaos_core.http import run_service
    from kaos_core.http.limits import HttpLimits
    from kaos_core.logging import configure_logging
    from kaos_core.settings import SettingsError, exit_on_settings_error
    from kaos_core.telemetry import setup_telemetry
    from kaos_core.telemetry.settings import TelemetrySettings

    from kaos_devmodel.app import SERVICE, create_app
    from kaos_devmodel.settings import DevModelSettings

    try:
        limits = HttpLimits.from_env()
        telemetry = TelemetrySettings.from_env()
        settings = DevModelSettings.from_env(
            host=args.host,
            port=args.port,
            embedding_dims=args.embedding_dims,
            script_file=args.script_file,
            log_level=args.log_level,
        )
        setup_telemetry(SERVICE, telemetry)
    except SettingsError as exc:
        exit_on_settings_error(exc)
    configure_logging(SERVICE, settings.log_level, json_format=settings.log_json)
    app = create_app(settings, limits=limits, telemetry=telemetry)
    run_service(app, settings.host, settings.port, shutdown_timeout=5.0)


if __name__ == "__main__":
    main()
