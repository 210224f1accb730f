"""``kaos-mcp``: serve the configured tools over MCP until SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import sys
from types import FrameType

from kaos_core.logging import configure_logging
from kaos_core.settings import SettingsError, exit_on_settings_error, load_settings
from kaos_core.telemetry import setup_telemetry

from kaos_agent.mcp_runtime.loader import ToolSourceError, load_tools
from kaos_agent.mcp_runtime.serve import serve
from kaos_agent.mcp_runtime.server import create_mcp_app
from kaos_agent.mcp_runtime.settings import McpSettings


def main() -> None:
    configure_logging("kaos-mcp", os.environ.get("KAOS_LOG_LEVEL", "INFO"))
    # One line per outgoing HTTP request (model, MCP) drowns the service's own log.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        settings = load_settings(McpSettings)
        setup_telemetry("kaos-mcp", settings.telemetry)
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
    serve(
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
