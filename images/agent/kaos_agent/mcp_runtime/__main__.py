"""``kaos-mcp``: serve the configured tools over MCP until SIGTERM.

The command line is read before anything else is imported: ``--help`` (and a wrong
argument) answers from the standard library alone, without loading the MCP server or the
tools' source, and without opening a socket.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import FrameType

PROG = "kaos-mcp"
DESCRIPTION = """\
Serve tools over the Model Context Protocol (streamable HTTP at /mcp) until SIGTERM: each
public top-level function of the Python source in MCP_TOOLS_STRING is a tool. In a
cluster the operator runs it for each MCPServer of runtime python-string."""
EPILOG = """\
Configured by environment variables only, e.g.:
  MCP_TOOLS_STRING       the tools' Python source (required)
  MCP_SERVER_NAME        MCP server name
  MCP_PORT               listen port
  KAOS_LOG_LEVEL         log level
Every variable, with its default, is in the agent runtime reference
(images/agent/README.md, kaos-mcp). A wrong value exits 2 naming the variable."""


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
    # The server is imported only now that the command line asked for it (see above).
    import logging
    import os
    import signal

    from kaos_core.logging import configure_logging
    from kaos_core.settings import SettingsError, exit_on_settings_error, load_settings
    from kaos_core.telemetry import setup_telemetry

    from kaos_agent.mcp_runtime.loader import ToolSourceError, load_tools
    from kaos_agent.mcp_runtime.serve import serve as serve_app
    from kaos_agent.mcp_runtime.server import create_mcp_app
    from kaos_agent.mcp_runtime.settings import McpSettings

    configure_logging(PROG, os.environ.get("KAOS_LOG_LEVEL", "INFO"))
    # One line per outgoing HTTP request (model, MCP) drowns the service's own log.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        settings = load_settings(McpSettings)
        setup_telemetry(PROG, settings.telemetry)
    except SettingsError as exc:
        exit_on_settings_error(exc)
    try:
        tools = load_tools(settings.tools.tools_string)
    except ToolSourceError as exc:
        print(f"error: MCP_TOOLS_STRING: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    app = create_mcp_app(settings, tools)
    # uvicorn turns SIGTERM into a graceful shutdown (stop accepting, finish requests),
    # then restores the previous handler and raises the signal again. With the default
    # handler that exit would read as a kill (-15); after a clean shutdown it is status 0,
    # as for the other KAOS services.
    signal.signal(signal.SIGTERM, _exit_cleanly)
    # uvicorn with the timeouts and the connection cap of every KAOS server (serve.py).
    server = settings.server
    serve_app(
        app,
        host=server.host,
        port=server.port,
        limits=settings.limits,
        timeout_graceful_shutdown=30,
    )


def _exit_cleanly(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    main()
