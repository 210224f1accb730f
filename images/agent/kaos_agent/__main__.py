"""``kaos-agent``: serve one agent until SIGTERM.

The command line is read before anything else is imported: ``--help`` (and a wrong
argument) answers from the standard library alone, without loading the reasoning loop or
its model client, and without opening a socket.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

PROG = "kaos-agent"
DESCRIPTION = """\
Serve one KAOS agent: a reasoning loop over an OpenAI-compatible model, with MCP tools,
peer agents (A2A) and memory, on /v1/chat/completions and A2A JSON-RPC at /, until
SIGTERM. In a cluster the operator runs it for each Agent."""
EPILOG = """\
Configured by environment variables only, e.g.:
  MODEL_API_URL          OpenAI-compatible endpoint of the model (required)
  MODEL_NAME             the model to ask (required)
  AGENT_NAME             name on the agent card
  AGENT_INSTRUCTIONS     system instructions of the reasoning loop
  MCP_SERVERS            MCP servers whose tools the agent may call
  MEMORY_TYPE            none, local (a window in the process) or remote (the memory
                         service at MEMORY_ENDPOINT)
  AGENT_PORT             listen port
  KAOS_LOG_LEVEL         log level
Every variable, with its default, is in the agent runtime reference
(images/agent/README.md). A wrong value exits 2 naming the variable."""


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
    import logging
    import os

    from kaos_core.http import run_service
    from kaos_core.logging import configure_logging
    from kaos_core.settings import SettingsError, exit_on_settings_error, load_settings
    from kaos_core.telemetry import setup_telemetry

    from kaos_agent.app import create_app
    from kaos_agent.settings import AgentSettings

    configure_logging(PROG, os.environ.get("KAOS_LOG_LEVEL", "INFO"))
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
