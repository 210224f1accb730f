"""``kaos-operator``: run the operator until SIGTERM.

The command line is read before anything else is imported: ``--help`` (and a wrong
argument) answers from the standard library alone, without loading the service, its
settings or a kubeconfig, and without opening a socket.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

PROG = "kaos-operator"
DESCRIPTION = """\
Run the KAOS operator: reconcile Agents, ModelAPIs, MCPServers and MemoryStores into
Deployments, Services and claims, and serve /healthz, /readyz and /metrics. It runs until
SIGTERM; normally the chart's Deployment starts it."""
EPILOG = """\
Configured by environment variables only (the chart's ConfigMap sets them), e.g.:
  KUBECONFIG                     kubeconfig to connect with (default: the pod's service
                                 account, else ~/.kube/config)
  KAOS_OPERATOR_WATCH_NAMESPACE  watch only this namespace (default: all)
  KAOS_OPERATOR_NAMESPACE        namespace of the leader-election Lease
  KAOS_OPERATOR_PORT             port of /healthz, /readyz and /metrics
  KAOS_OPERATOR_LOG_LEVEL        log level of the JSON logs on stderr
Every variable, with its default, is in the operator settings reference
(images/operator/SETTINGS.md). A wrong value exits 2 naming the variable."""


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    parse_args(argv)
    serve()


def serve() -> None:
    # The service is imported only now that the command line asked for it (see above).
    import asyncio

    from kaos_core.http import run_service
    from kaos_core.logging import configure_logging
    from kaos_core.settings import SettingsError, exit_on_settings_error, load_settings
    from kaos_core.telemetry import setup_telemetry

    from kaos_operator.app import create_app
    from kaos_operator.kube import ClusterConfigError, load_configuration
    from kaos_operator.settings import OperatorSettings

    try:
        settings = load_settings(OperatorSettings)
        # Before anything starts: without a cluster to reach, one line and status 2
        # rather than a listening port and a traceback.
        asyncio.run(load_configuration(settings.cluster.kubeconfig))
        setup_telemetry(PROG, settings.telemetry)
    except SettingsError as exc:
        exit_on_settings_error(exc)
    except ClusterConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    server = settings.server
    configure_logging(PROG, server.log_level)
    run_service(create_app(settings), server.host, server.port)


if __name__ == "__main__":
    main()
